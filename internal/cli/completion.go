package cli

import (
	"github.com/spf13/cobra"
)

// completionShells are the shells `latch completion` writes a script for.
var completionShells = []string{"bash", "zsh", "fish"}

func (a *app) completionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script for bash, zsh or fish",
		Long: `Print a script that completes latch's commands and flags in your shell.

  bash:  source <(latch completion bash)
         (to keep it: latch completion bash > /etc/bash_completion.d/latch)
  zsh:   latch completion zsh > "${fpath[1]}/_latch"   (with compinit enabled)
  fish:  latch completion fish > ~/.config/fish/completions/latch.fish

The scripts ask the latch binary on $PATH what to complete, so they stay right when latch is
upgraded.`,
		ValidArgs: completionShells,
		Args:      exactArgs("SHELL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(a.stdout, true)
			case "zsh":
				return root.GenZshCompletion(a.stdout)
			case "fish":
				return root.GenFishCompletion(a.stdout, true)
			}
			return usagef("unknown shell %q (expected bash, zsh or fish)", args[0])
		},
	}
}
