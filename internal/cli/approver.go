package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/latchkit/latch/server/console"
	"github.com/latchkit/latch/store"
)

func (a *app) approverCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approver",
		Short: "Add, list and remove the local approver accounts of the console",
		Long: `Local approver accounts log in to the console of 'latch serve' with a password
(docs/approvals.md). An account answers as its NAME; --role makes it a member of a
role the policy's approvers section defines (a role the policy does not define counts
for nothing). The password is read from standard input (prompted twice, without echo,
on a terminal) and only its bcrypt hash is stored.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usagef("say what to do: add, list or remove")
		},
	}
	cmd.AddCommand(a.approverAddCommand(), a.approverListCommand(), a.approverRemoveCommand())
	for _, c := range cmd.Commands() {
		c.SilenceErrors, c.SilenceUsage = true, true
	}
	return cmd
}

// openAccounts opens the store for approver accounts, creating and migrating it when write.
func (a *app) openAccounts(write bool) (store.Store, store.AccountStore, error) {
	return openStoreAs[store.AccountStore](a, write, "approver accounts")
}

// readPassword reads a new password: prompted twice without echo on a terminal, else the first
// line of in.
func (a *app) readPassword(in io.Reader, name string) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(a.stderr, "password for %s: ", name)
		p1, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		fmt.Fprint(a.stderr, "again: ")
		p2, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		if string(p1) != string(p2) {
			return "", errors.New("the two passwords differ")
		}
		return string(p1), nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("no password on standard input")
	}
	return line, nil
}

func (a *app) approverAddCommand() *cobra.Command {
	var roles []string
	cmd := &cobra.Command{
		Use:   "add NAME [--role ROLE]...",
		Short: "Create an approver account; the password is read from standard input",
		Example: `  latch approver add alice --role payments-leads
  printf '%s\n' "$ALICE_PASSWORD" | latch approver add alice --role payments-leads --role sre`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			name, err := store.NormalizeApprover(pos[0])
			if err != nil {
				return usagef("NAME: %s", err.Error())
			}
			for _, r := range roles {
				if err := store.CheckRole(r); err != nil {
					return usagef("--role: %s", err.Error())
				}
			}
			password, err := a.readPassword(cmd.InOrStdin(), name)
			if err != nil {
				return err
			}
			hash, err := console.HashPassword(password)
			if err != nil {
				return err
			}
			st, as, err := a.openAccounts(true)
			if err != nil {
				return err
			}
			defer st.Close()
			acct := &store.Account{Name: name, PasswordHash: hash, Roles: store.SortRoles(roles), CreatedAt: a.now().UTC()}
			if err := as.CreateAccount(a.ctx, acct); err != nil {
				if errors.Is(err, store.ErrAccountExists) {
					return fmt.Errorf("an account named %s exists (names are compared without case): remove it first to replace it", name)
				}
				return err
			}
			rs := "no roles"
			if len(acct.Roles) > 0 {
				rs = "roles " + strings.Join(acct.Roles, ", ")
			}
			fmt.Fprintf(a.stdout, "added approver %s (%s)\n", acct.Name, rs)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&roles, "role", nil, "make the account a member of `ROLE` (repeatable)")
	return cmd
}

// accountJSON is an account as `latch approver list --json` prints it (never its hash).
type accountJSON struct {
	Name      string   `json:"name"`
	Roles     []string `json:"roles"`
	CreatedAt *string  `json:"created_at"`
}

func (a *app) approverListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json]",
		Short: "List approver accounts and their roles",
		Args:  exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, as, err := a.openAccounts(false)
			if err != nil {
				return err
			}
			defer st.Close()
			list, err := as.Accounts(a.ctx)
			if err != nil {
				return err
			}
			if asJSON {
				for _, ac := range list {
					if err := jsonLine(a.stdout, accountJSON{Name: ac.Name, Roles: ac.Roles, CreatedAt: jstamp(ac.CreatedAt)}); err != nil {
						return err
					}
				}
				return nil
			}
			if len(list) == 0 {
				fmt.Fprintln(a.stdout, "no approver accounts")
				return nil
			}
			t := newTable(a.stdout, "NAME", "ROLES", "CREATED")
			for _, ac := range list {
				t.row(cell(ac.Name), dash(strings.Join(ac.Roles, ", ")), stamp(ac.CreatedAt))
			}
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON Lines")
	return cmd
}

func (a *app) approverRemoveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove an approver account: its console sessions end at their next request",
		Args:  exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, pos []string) error {
			st, as, err := a.openAccounts(true)
			if err != nil {
				return err
			}
			defer st.Close()
			ac, err := as.RemoveAccount(a.ctx, pos[0])
			switch {
			case errors.Is(err, store.ErrNotFound):
				return fmt.Errorf("no approver account %s in this store", pos[0])
			case err != nil:
				return err
			}
			fmt.Fprintf(a.stdout, "removed approver %s\n", ac.Name)
			return nil
		},
	}
}
