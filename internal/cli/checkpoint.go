package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store"
)

func (a *app) checkpointCommand() *cobra.Command {
	var keyFile, export string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "checkpoint --key FILE [--export FILE] [--json]",
		Short: "Sign the chain head with a key kept outside the store",
		Long: `Sign the receipt chain's head (seq, hash, time, the store's identity) with an
Ed25519 key kept outside the store, store the signed checkpoint and print it.

Someone who can rewrite every row and the chain head can forge a chain that verifies;
they cannot forge a checkpoint. latch receipts --verify --checkpoints --pubkey FILE
then names any receipt at or before a checkpoint that was rewritten (checkpoint_mismatch)
or cut off (checkpoint_truncated). --export writes the checkpoint to a file as well, to
keep elsewhere (an anchor that survives the store's rows being deleted too).

latch checkpoint keygen --out FILE writes a new key (FILE, mode 0600) and its public
key (FILE.pub).`,
		Example: "  latch checkpoint keygen --out ~/.latch/checkpoint.key\n  latch checkpoint --key ~/.latch/checkpoint.key --export cp-$(date +%F).json\n  latch receipts --verify --checkpoints --pubkey ~/.latch/checkpoint.key.pub",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if keyFile == "" {
				return usagef("--key FILE is required (make one with latch checkpoint keygen --out FILE)")
			}
			b, err := os.ReadFile(keyFile)
			if err != nil {
				return fmt.Errorf("read key: %w", err)
			}
			key, err := receipt.ParseSigningKey(b)
			if err != nil {
				return fmt.Errorf("key %s: %w", keyFile, err)
			}
			st, err := a.openWrite()
			if err != nil {
				return err
			}
			defer st.Close()
			cp, err := store.SignCheckpoint(a.ctx, st, key, time.Now())
			if err != nil {
				return err
			}
			if export != "" {
				doc, err := json.MarshalIndent(cp, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(export, append(doc, '\n'), 0o644); err != nil {
					return fmt.Errorf("export checkpoint: %w", err)
				}
			}
			if asJSON {
				return jsonLine(a.stdout, cp)
			}
			fmt.Fprintf(a.stdout, "checkpoint seq %d %s\n  store      %s\n  signed at  %s\n  key        %s\n  signature  %s\n",
				cp.Seq, cp.Hash, cp.StoreID, cp.SignedAt.UTC().Format(receipt.TimeFormat), cp.KeyID, cp.Signature)
			if export != "" {
				fmt.Fprintf(a.stdout, "  exported   %s\n", export)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyFile, "key", "", "the Ed25519 private key `FILE` (PEM) to sign with")
	f.StringVar(&export, "export", "", "also write the signed checkpoint to `FILE`")
	f.BoolVar(&asJSON, "json", false, "print the checkpoint as one JSON object")
	cmd.AddCommand(a.keygenCommand())
	return cmd
}

func (a *app) keygenCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Write a new Ed25519 checkpoint key (FILE) and its public key (FILE.pub)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out FILE is required")
			}
			priv, pub, err := receipt.NewSigningKey()
			if err != nil {
				return err
			}
			for _, f := range []struct {
				path string
				b    []byte
				mode fs.FileMode
			}{{out, priv, 0o600}, {out + ".pub", pub, 0o644}} {
				fh, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.mode)
				if errors.Is(err, fs.ErrExist) {
					return fmt.Errorf("%s exists: a key is never overwritten", f.path)
				}
				if err != nil {
					return err
				}
				_, err = fh.Write(f.b)
				if cerr := fh.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					return err
				}
			}
			k, _ := receipt.ParsePublicKey(pub)
			fmt.Fprintf(a.stdout, "wrote %s (private, keep it outside the store) and %s.pub (%s)\n", out, out, receipt.KeyID(k))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "write the private key to `FILE` and the public key to FILE.pub")
	return cmd
}

// readCheckpointKey reads the checkpoint public key in pubFile and the exported checkpoints in
// anchorFiles.
func readCheckpointKey(pubFile string, anchorFiles []string) (ed25519.PublicKey, []*receipt.Checkpoint, error) {
	b, err := os.ReadFile(pubFile)
	if err != nil {
		return nil, nil, fmt.Errorf("read public key: %w", err)
	}
	pub, err := receipt.ParsePublicKey(b)
	if err != nil {
		return nil, nil, fmt.Errorf("public key %s: %w", pubFile, err)
	}
	var anchors []*receipt.Checkpoint
	for _, f := range anchorFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("read checkpoint: %w", err)
		}
		var c receipt.Checkpoint
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, nil, fmt.Errorf("checkpoint %s: %w", f, err)
		}
		anchors = append(anchors, &c)
	}
	return pub, anchors, nil
}

// scheduledCheckpoints signs a checkpoint of the chain head on a schedule, for latch serve.
type scheduledCheckpoints struct {
	keyFile string
	every   time.Duration
	pub     checkpointPublicKey
}

func (c *scheduledCheckpoints) flags(f *pflag.FlagSet) {
	f.StringVar(&c.keyFile, "checkpoint-key", "", "sign a checkpoint of the chain head with this Ed25519 key `FILE` on a schedule")
	f.DurationVar(&c.every, "checkpoint-every", time.Hour, "how often --checkpoint-key signs (`DURATION`); only when the chain grew")
	c.pub.flags(f)
}

// publicKey is the key the chain's verification checks checkpoints with: --checkpoint-pubkey,
// else the public half of --checkpoint-key, else none.
func (c *scheduledCheckpoints) publicKey() (ed25519.PublicKey, error) {
	if c.pub.file != "" || c.keyFile == "" {
		return c.pub.read()
	}
	b, err := os.ReadFile(c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint key: %w", err)
	}
	key, err := receipt.ParseSigningKey(b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint key %s: %w", c.keyFile, err)
	}
	return key.Public().(ed25519.PublicKey), nil
}

// checkpointPublicKey is the --checkpoint-pubkey flag of the commands that verify the chain on
// request (latch serve, latch mcp-operator).
type checkpointPublicKey struct{ file string }

func (c *checkpointPublicKey) flags(f *pflag.FlagSet) {
	f.StringVar(&c.file, "checkpoint-pubkey", "", "check the signed checkpoints when verifying the chain, with this public key `FILE` (PEM, from latch checkpoint keygen)")
}

// read reads the key; nil when the flag was not given.
func (c *checkpointPublicKey) read() (ed25519.PublicKey, error) {
	if c.file == "" {
		return nil, nil
	}
	b, err := os.ReadFile(c.file)
	if err != nil {
		return nil, fmt.Errorf("read checkpoint public key: %w", err)
	}
	pub, err := receipt.ParsePublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint public key %s: %w", c.file, err)
	}
	return pub, nil
}

// start reads the key (an unreadable key fails serve before it listens) and signs a checkpoint
// at once and then every c.every, while ctx lasts, whenever the chain grew since the last one.
func (c *scheduledCheckpoints) start(ctx context.Context, st store.Store, log *slog.Logger) error {
	if c.keyFile == "" {
		return nil
	}
	if c.every <= 0 {
		return usagef("--checkpoint-every %s: want a positive duration", c.every)
	}
	b, err := os.ReadFile(c.keyFile)
	if err != nil {
		return fmt.Errorf("read checkpoint key: %w", err)
	}
	key, err := receipt.ParseSigningKey(b)
	if err != nil {
		return fmt.Errorf("checkpoint key %s: %w", c.keyFile, err)
	}
	go func() {
		var last int64
		t := time.NewTicker(c.every)
		defer t.Stop()
		for {
			if head, err := st.Head(ctx); err == nil && head.Seq > last {
				if cp, err := store.SignCheckpoint(ctx, st, key, time.Now()); err != nil {
					log.Warn("latch: scheduled checkpoint not signed", "err", err)
				} else {
					last = cp.Seq
					log.Info("latch: checkpoint signed", "seq", cp.Seq, "hash", cp.Hash, "key", cp.KeyID)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}
