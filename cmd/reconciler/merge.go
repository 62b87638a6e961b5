package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

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
	files := make([]policy.SourceFile, 0, fs.NArg())
	for _, name := range fs.Args() {
		data, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintf(a.stderr, "reconciler merge: %v\n", err)
			return exitCheck
		}
		files = append(files, policy.SourceFile{Name: name, Data: data})
	}
	p, err := policy.MergeFiles(files, policy.LoadOptions{MergeDefault: st})
	if err != nil {
		printErrors(a.stderr, ".", err)
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
