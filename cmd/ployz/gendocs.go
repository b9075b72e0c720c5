package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/ployz/ployz/internal/version"
)

// gendocsCommand writes shell completions and man pages generated from the
// command tree itself, for `make release` (hidden: not an operator verb).
func gendocsCommand() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:    "gendocs",
		Short:  "Write shell completions and man pages into --out",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			root := c.Root()
			comp := filepath.Join(out, "completions")
			man := filepath.Join(out, "man", "man1")
			for _, d := range []string{comp, man} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			gens := []struct {
				file string
				gen  func(string) error
			}{
				{"ployz.bash", func(p string) error { return root.GenBashCompletionFileV2(p, true) }},
				{"_ployz", root.GenZshCompletionFile},
				{"ployz.fish", func(p string) error { return root.GenFishCompletionFile(p, true) }},
			}
			for _, g := range gens {
				if err := g.gen(filepath.Join(comp, g.file)); err != nil {
					return fmt.Errorf("completion %s: %w", g.file, err)
				}
			}
			hdr := &doc.GenManHeader{Title: "PLOYZ", Section: "1", Source: "Ployz " + version.Version}
			root.DisableAutoGenTag = true
			if err := doc.GenManTree(root, hdr, man); err != nil {
				return fmt.Errorf("man pages: %w", err)
			}
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "dist/docs", "output directory")
	return c
}
