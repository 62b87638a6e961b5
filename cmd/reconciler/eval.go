package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// maxInputBytes bounds the request read by eval, like the API's body limit.
const maxInputBytes = 16 << 20

// eval implements `reconciler eval --policy DIR [--input FILE|-]`: one
// decision for one request JSON, printed as the decision JSON.
func (a *app) eval(args []string) int {
	fs := a.flagSet("eval", "--policy DIR [--input FILE|-]")
	dir := fs.String("policy", "", "policy `DIR` (a directory directly under a policies root)")
	input := fs.String("input", "-", "request JSON `FILE`, or - for standard input")
	strategy := strategyFlag(fs, "merge-default")
	explain := fs.Bool("lists", false, "after the decision, print which entry of each named list the request is in (one JSON object a line)")
	if code, ok := a.parse(fs, args, 0, 0); !ok {
		return code
	}
	st, err := parseStrategy(*strategy)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler eval: --merge-default: %v\n", err)
		return exitUsage
	}
	if *dir == "" {
		fmt.Fprintln(a.stderr, "reconciler eval: --policy is required")
		fs.Usage()
		return exitUsage
	}
	cp, ok := a.compileOne(*dir, st)
	if !ok {
		return exitCheck
	}
	req, err := a.readRequest(*input)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler eval: %v\n", err)
		return exitCheck
	}
	d := cp.Evaluate(req)
	out, err := json.Marshal(d)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler eval: %v\n", err)
		return exitCheck
	}
	fmt.Fprintf(a.stdout, "%s\n", out)
	if *explain {
		for _, m := range cp.ListMatches(req) {
			line, _ := json.Marshal(m)
			fmt.Fprintf(a.stdout, "%s\n", line)
		}
	}
	return exitOK
}

// compileOne loads and compiles the policy in dir. Its parent is the
// policies root, so that includes such as ../_shared/x.toml resolve.
func (a *app) compileOne(dir string, st policy.Strategy) (*engine.CompiledPolicy, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler eval: %v\n", err)
		return nil, false
	}
	root, err := os.OpenRoot(filepath.Dir(abs))
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler eval: %v\n", err)
		return nil, false
	}
	defer root.Close()
	// os.Root: a link out of the directory is refused, not followed.
	p, err := policy.LoadPolicy(root.FS(), filepath.Base(abs), policy.LoadOptions{MergeDefault: st})
	if err != nil {
		printErrors(a.stderr, filepath.Dir(filepath.Clean(dir)), err)
		return nil, false
	}
	cp, err := engine.Compile(p, engine.DefaultOptions())
	if err != nil {
		printErrors(a.stderr, filepath.Dir(filepath.Clean(dir)), err)
		return nil, false
	}
	return cp, true
}

// readRequest decodes the request JSON from a file or stdin and fills the
// current time when it has none, as the API does.
func (a *app) readRequest(name string) (*engine.Request, error) {
	var r io.Reader = a.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxInputBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read request: %w", err)
	}
	if len(data) > maxInputBytes {
		return nil, fmt.Errorf("request is larger than %d bytes", maxInputBytes)
	}
	req, err := engine.DecodeRequest(data)
	if err != nil {
		return nil, err
	}
	if req.Time.IsZero() {
		req.Time = time.Now()
	}
	return req, nil
}
