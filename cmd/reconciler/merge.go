package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/policyrollout/reconciler/internal/policy"
)

// merge implements `reconciler merge [--strategy S] [--format F] FILE...`,
// Keystone's policy merge CLI: the files in the order given, later files
// meeting earlier rule names under the strategy.
func (a *app) merge(args []string) int {
	fs := a.flagSet("merge", "[--strategy fail|override|maintain] [--format toml|json] FILE...")
	strategy := strategyFlag(fs, "strategy")
	format := fs.String("format", "toml", "output `format`: toml or json")
	if code, ok := a.parse(fs, args, 1, -1); !ok {
		return code
	}
	st, err := parseStrategy(*strategy)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler merge: --strategy: %v\n", err)
		return exitUsage
	}
	if *format != "toml" && *format != "json" {
		fmt.Fprintf(a.stderr, "reconciler merge: --format %q must be toml or json\n", *format)
		return exitUsage
	}
	root, paths, err := mergeRoot(fs.Args())
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler merge: %v\n", err)
		return exitUsage
	}
	rfs, err := os.OpenRoot(root)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler merge: %v\n", err)
		return exitCheck
	}
	defer rfs.Close()
	// os.Root: a link out of the directory is refused, not followed.
	p, err := policy.MergePaths(rfs.FS(), paths, policy.LoadOptions{MergeDefault: st})
	if err != nil {
		printErrors(a.stderr, root, err)
		return exitCheck
	}
	out, err := render(p, *format)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler merge: %v\n", err)
		return exitCheck
	}
	_, _ = a.stdout.Write(out)
	return exitOK
}

// mergeRoot picks the directory the files are read from: the working
// directory when every file lies inside it (so errors name files as the user
// typed them), else the file system root. includes may not leave that root.
func mergeRoot(args []string) (string, []string, error) {
	paths := make([]string, len(args))
	local := true
	for i, a := range args {
		paths[i] = filepath.ToSlash(filepath.Clean(a))
		local = local && filepath.IsLocal(a)
	}
	if local {
		return ".", paths, nil
	}
	for i, a := range args {
		abs, err := filepath.Abs(a)
		if err != nil {
			return "", nil, err
		}
		paths[i] = strings.TrimPrefix(filepath.ToSlash(abs), "/")
	}
	return "/", paths, nil
}

// render writes a merged policy as TOML, or as indented JSON with the same
// keys (CONTRACT.md §4).
func render(p *policy.Policy, format string) ([]byte, error) {
	if format == "toml" {
		return p.MarshalTOML()
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, p.Canonical(), "", "  "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}
