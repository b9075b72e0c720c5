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
				return show(c, added, err, func(w io.Writer) error { return render.CertificateAdded(w, added) })
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
			if err := client.CheckCertificateRef(args[0]); err != nil {
				return err // refused before reaching the Cluster
			}
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
	cmd.AddCommand(add, ls, rm, dnsProviderCommand())
	return cmd
}

// dnsProviderCommand is `ployz cert dns-provider`: the credentials the
// ingress answers ACME DNS-01 challenges with.
func dnsProviderCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "dns-provider", Short: "Manage the DNS providers the ingress obtains certificates with (ACME DNS-01: wildcards, Machines the CA cannot reach)"}
	var in client.DNSProviderInput
	set := &cobra.Command{
		Use:   "set NAME --provider rfc2136 --zone ZONE --server HOST[:PORT] --tsig-key NAME (--tsig-secret B64 | --tsig-secret-file FILE) [--tsig-algorithm ALG]",
		Short: "Add or replace a DNS provider: names in its zone (and their wildcards) are then validated with DNS-01; secrets are sealed with the Cluster key and never shown",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			req, err := in.Request(args[0])
			if err != nil {
				return err // refused before reaching the Cluster
			}
			return withClient(c, func(s *client.Session) error {
				p, err := s.SetDNSProvider(c.Context(), req)
				return show(c, p, err, func(w io.Writer) error { return render.DNSProviderSet(w, p) })
			})
		},
	}
	f := set.Flags()
	f.StringVar(&in.Provider, "provider", "rfc2136", "provider: rfc2136 (DNS UPDATE with TSIG: BIND, Knot, PowerDNS, Windows DNS)")
	f.StringVar(&in.Zone, "zone", "", "the zone it changes, e.g. example.com. (covers its names and their wildcards)")
	f.StringVar(&in.Server, "server", "", "rfc2136: the zone's primary server, host or host:port (port 53 by default)")
	f.StringVar(&in.TSIGKey, "tsig-key", "", "rfc2136: the TSIG key's name, as the server's configuration names it")
	f.StringVar(&in.TSIGAlgorithm, "tsig-algorithm", "", "rfc2136: hmac-sha256 (default), hmac-sha512, hmac-sha384, hmac-sha224 or hmac-sha1")
	f.StringVar(&in.TSIGSecret, "tsig-secret", "", "rfc2136: the key's base64 secret (prefer --tsig-secret-file: a flag stays in the shell's history)")
	f.StringVar(&in.TSIGSecretFile, "tsig-secret-file", "", "rfc2136: a file whose first line is the key's base64 secret")
	_ = set.MarkFlagRequired("zone")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the DNS providers: zone and settings; secrets are named, never shown",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return withClient(c, func(s *client.Session) error {
				ps, err := s.DNSProviders(c.Context())
				return show(c, ps, err, func(w io.Writer) error { return render.DNSProviders(w, ps) })
			})
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a DNS provider: names of its zone go back to HTTP-01, its wildcards get no new certificate",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return withClient(c, func(s *client.Session) error {
				p, err := s.RemoveDNSProvider(c.Context(), args[0])
				return show(c, p, err, func(w io.Writer) error {
					_, err := fmt.Fprintf(w, "removed %s\n", p.Name)
					return err
				})
			})
		},
	}
	cmd.AddCommand(set, ls, rm)
	return cmd
}
