package receipt

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/latchkit/latch/canon"
)

// CheckpointSchema is the schema tag of a signed checkpoint statement.
const CheckpointSchema = "latch.checkpoint/v1"

// Checkpoint is a signed statement about a chain head (docs/guarantees.md#signed-checkpoints):
// the receipt at Seq has hash Hash, in the store StoreID, as of SignedAt. It is signed with an
// Ed25519 key kept outside the store, so that someone who rewrites every row and the head
// cannot make the chain agree with it again: the rewritten receipt at Seq hashes otherwise.
type Checkpoint struct {
	Seq       int64     `json:"seq"`
	Hash      string    `json:"hash"`
	SignedAt  time.Time `json:"-"`
	StoreID   string    `json:"store_id"`
	KeyID     string    `json:"key_id"`
	Signature string    `json:"-"` // base64 (standard, padded) of the Ed25519 signature of Statement
}

// Statement is the canonical JSON document the signature covers.
func (c *Checkpoint) Statement() ([]byte, error) {
	return canon.Marshal(map[string]any{
		"schema":    CheckpointSchema,
		"seq":       c.Seq,
		"hash":      c.Hash,
		"signed_at": c.SignedAt.UTC().Format(TimeFormat),
		"store_id":  c.StoreID,
		"key_id":    c.KeyID,
	})
}

// checkpointFile is a checkpoint as printed and exported: the statement's fields and the
// signature.
type checkpointFile struct {
	Schema    string `json:"schema"`
	Seq       int64  `json:"seq"`
	Hash      string `json:"hash"`
	SignedAt  string `json:"signed_at"`
	StoreID   string `json:"store_id"`
	KeyID     string `json:"key_id"`
	Signature string `json:"signature"`
}

// MarshalJSON writes the checkpoint as it is exported: its statement's fields and its signature.
func (c Checkpoint) MarshalJSON() ([]byte, error) {
	return json.Marshal(checkpointFile{Schema: CheckpointSchema, Seq: c.Seq, Hash: c.Hash,
		SignedAt: c.SignedAt.UTC().Format(TimeFormat), StoreID: c.StoreID, KeyID: c.KeyID, Signature: c.Signature})
}

// UnmarshalJSON reads an exported checkpoint.
func (c *Checkpoint) UnmarshalJSON(b []byte) error {
	var f checkpointFile
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	if f.Schema != CheckpointSchema {
		return fmt.Errorf("checkpoint schema is %q, want %q", f.Schema, CheckpointSchema)
	}
	t, err := time.Parse(TimeFormat, f.SignedAt)
	if err != nil {
		return fmt.Errorf("checkpoint signed_at: %w", err)
	}
	*c = Checkpoint{Seq: f.Seq, Hash: f.Hash, SignedAt: t, StoreID: f.StoreID, KeyID: f.KeyID, Signature: f.Signature}
	return nil
}

// KeyID names a public key: ed25519: and the first 16 bytes of its SHA-256, in hex.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:16])
}

// SignCheckpoint signs the head (seq, hash) of store storeID at now with key.
func SignCheckpoint(key ed25519.PrivateKey, head Head, storeID string, now time.Time) (*Checkpoint, error) {
	if head.Seq < 1 {
		return nil, errors.New("sign checkpoint: the chain is empty: there is nothing to sign")
	}
	c := &Checkpoint{Seq: head.Seq, Hash: head.Hash, SignedAt: now.UTC().Truncate(time.Millisecond), StoreID: storeID,
		KeyID: KeyID(key.Public().(ed25519.PublicKey))}
	st, err := c.Statement()
	if err != nil {
		return nil, fmt.Errorf("sign checkpoint: %w", err)
	}
	c.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, st))
	return c, nil
}

// VerifySignature checks c's signature with pub; an error says why it does not hold.
func (c *Checkpoint) VerifySignature(pub ed25519.PublicKey) error {
	if c.KeyID != KeyID(pub) {
		return fmt.Errorf("signed by key %s, the public key given is %s", c.KeyID, KeyID(pub))
	}
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil {
		return fmt.Errorf("signature is not base64: %w", err)
	}
	st, err := c.Statement()
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, st, sig) {
		return errors.New("the signature does not verify: the statement or the signature was altered")
	}
	return nil
}

// NewSigningKey returns a fresh Ed25519 key as PEM: the private key (PKCS #8) and the public
// key (PKIX).
func NewSigningKey() (private, public []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, nil, err
	}
	p8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, err
	}
	px, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: px}), nil
}

// ParseSigningKey reads an Ed25519 private key in PEM (PKCS #8), as NewSigningKey writes it.
func ParseSigningKey(b []byte) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM PRIVATE KEY block")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the key is %T, not Ed25519", k)
	}
	return ek, nil
}

// ParsePublicKey reads an Ed25519 public key in PEM (PKIX), as NewSigningKey writes it.
func ParsePublicKey(b []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM PUBLIC KEY block")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("the key is %T, not Ed25519", k)
	}
	return ek, nil
}
