package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/tlsconfig"
)

// certs creates the cluster CA and node certificates of [tls], like
// `consul tls ca create` and `consul tls cert create`:
//
//	reconciler certs ca   --dir certs
//	reconciler certs node --dir certs --id n1 --host 10.0.0.1
func (a *app) certs(args []string) int {
	if len(args) > 0 && (args[0] == "ca" || args[0] == "node") {
		if args[0] == "ca" {
			return a.certsCA(args[1:])
		}
		return a.certsNode(args[1:])
	}
	fs := a.flagSet("certs", "ca|node [flags]")
	if code, ok := a.parse(fs, args, 0, 0); !ok {
		return code
	}
	fs.Usage()
	return exitUsage
}

func (a *app) certsCA(args []string) int {
	fs := a.flagSet("certs ca", "[--dir DIR] [--days N]")
	dir := fs.String("dir", "certs", "`DIR` to write ca.pem and ca-key.pem to")
	days := fs.Int("days", int(tlsconfig.DefaultCAValidity/(24*time.Hour)), "validity in `DAYS`")
	if code, ok := a.parse(fs, args, 0, 0); !ok {
		return code
	}
	if err := tlsconfig.CreateCA(*dir, time.Duration(*days)*24*time.Hour); err != nil {
		fmt.Fprintf(a.stderr, "reconciler certs ca: %v\n", err)
		return exitCheck
	}
	fmt.Fprintf(a.stdout, "wrote %s/%s and %s/%s (keep the key offline: whoever has it can add nodes)\n",
		*dir, tlsconfig.CAFile, *dir, tlsconfig.CAKeyFile)
	return exitOK
}

func (a *app) certsNode(args []string) int {
	fs := a.flagSet("certs node", "--id ID [--dir DIR] [--host H]... [--days N]")
	dir := fs.String("dir", "certs", "`DIR` holding the CA; the certificate is written there")
	id := fs.String("id", "", "the node's `ID` (node.id); the certificate names it")
	days := fs.Int("days", int(tlsconfig.DefaultNodeValidity/(24*time.Hour)), "validity in `DAYS`")
	var hosts []string
	fs.Func("host", "an IP address or DNS name the node is reached at (repeat, or separate with commas); "+
		"localhost and 127.0.0.1 are always included", func(v string) error {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hosts = append(hosts, h)
			}
		}
		return nil
	})
	if code, ok := a.parse(fs, args, 0, 0); !ok {
		return code
	}
	if *id == "" {
		fmt.Fprintln(a.stderr, "reconciler certs node: --id is required")
		return exitUsage
	}
	f, err := tlsconfig.CreateNode(*dir, *id, hosts, time.Duration(*days)*24*time.Hour)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler certs node: %v\n", err)
		return exitCheck
	}
	fmt.Fprintf(a.stdout, "wrote %s and %s\n\n[tls]\nca_file = %q\ncert_file = %q\nkey_file = %q\n",
		f.Cert, f.Key, f.CA, f.Cert, f.Key)
	return exitOK
}
