package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/client"
	"github.com/ployz/ployz/client/render"
)

func certCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "cert", Short: "Manage the certificates the ingress serves"}
	var certFile, keyFile string
	add := &cobra.Command{
		Use:   "add --cert FILE --key FILE",
		Short: "Add a certificate (PEM chain, leaf first) and its private key: served by every Machine's ingress for its names, before ACME",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				added, err := s.AddCertificateFiles(c.Context(), certFile, keyFile)
				return show(c, added, err, func(w io.Writer) error {
					if err := render.Certificates(w, client.Certificates{Certificates: []client.Certificate{added}}); err != nil {
						return err
					}
					for _, n := range added.Notes {
						fmt.Fprintf(w, "note: %s\n", n)
					}
					return nil
				})
			})
		},
	}
	add.Flags().StringVar(&certFile, "cert", "", "PEM certificate chain, leaf first")
	add.Flags().StringVar(&keyFile, "key", "", "PEM private key of the leaf")
	_ = add.MarkFlagRequired("cert")
	_ = add.MarkFlagRequired("key")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the certificates: names, issuer, expiry, source (acme or user), and a warning within 21 days of expiry",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				cs, err := s.Certificates(c.Context())
				return show(c, cs, err, func(w io.Writer) error { return render.Certificates(w, cs) })
			})
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME|ID",
		Short: "Remove a user certificate by id or by a name it covers; ACME takes its names back",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				cs, err := s.RemoveCertificate(c.Context(), args[0])
				return show(c, cs, err, func(w io.Writer) error {
					for _, r := range cs.Certificates {
						fmt.Fprintf(w, "removed %s\n", r.ID)
					}
					return nil
				})
			})
		},
	}
	cmd.AddCommand(add, ls, rm)
	return cmd
}
