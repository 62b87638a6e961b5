package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/sandbox"
)

// strategyFlag registers --merge-default, the conflict strategy when neither
// a file nor its policy names one (config.toml's [policy] merge_default).
func strategyFlag(fs *flag.FlagSet, name string) *string {
	return fs.String(name, string(policy.StrategyFail), "conflict `strategy`: fail, override or maintain")
}

func parseStrategy(s string) (policy.Strategy, error) {
	switch st := policy.Strategy(s); st {
	case policy.StrategyFail, policy.StrategyOverride, policy.StrategyMaintain:
		return st, nil
	}
	return "", fmt.Errorf("strategy %q must be fail, override or maintain", s)
}

// checkTree reads the policies root dir as the leader reads a git tree
// (regular files only, links not followed, within the tree budgets) and
// validates it with engine.ValidateTree, the function the leader calls,
// printing every problem to w as file:line: message. ok is false when dir
// could not be read; v then holds no policy.
//
// With a bounded child (the binary itself as validate-worker, under the
// default [validation] limits) the tree is first validated as the leader
// validates it, so a tree that would kill the leader's child fails here
// too, without this process spending what the child may not.
func checkTree(w io.Writer, dir string, strategy policy.Strategy, child *sandbox.Runner) (v engine.Validation, ok bool) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		fmt.Fprintf(w, "%s: %v\n", dir, err)
		return v, false
	}
	defer root.Close()
	files, err := policy.ReadTree(root.FS())
	if err != nil {
		fmt.Fprintf(w, "%s: %v\n", dir, err)
		return v, false
	}
	lopts := policy.LoadOptions{MergeDefault: strategy}
	if child != nil {
		for _, p := range child.Validate(files, lopts, engine.DefaultOptions()).Problems {
			if strings.HasPrefix(p, sandbox.BudgetMessage) {
				fmt.Fprintf(w, "%s: %s\n", dir, p)
				return v, false
			}
		}
	}
	v = engine.ValidateTree(files, lopts, engine.DefaultOptions())
	for _, e := range v.Problems {
		fmt.Fprintln(w, relocate(dir, e).Error())
	}
	return v, true
}

// countRules is the number of rules of the compiled policies.
func countRules(cps []*engine.CompiledPolicy) int {
	n := 0
	for _, cp := range cps {
		n += len(cp.Source().Rules)
	}
	return n
}

// printErrors prints each problem of err on its own line, file names
// relative to the working directory, and returns how many it printed.
func printErrors(w io.Writer, dir string, err error) int {
	var list policy.ErrorList
	if !errors.As(err, &list) {
		var one *policy.Error
		if !errors.As(err, &one) {
			fmt.Fprintf(w, "%s: %v\n", dir, err)
			return 1
		}
		list = policy.ErrorList{one}
	}
	for _, e := range list {
		fmt.Fprintln(w, relocate(dir, e).Error())
	}
	return len(list)
}

// relocate returns e with its file named relative to the working directory
// rather than to the policies root.
func relocate(dir string, e *policy.Error) *policy.Error {
	c := *e
	if c.File != "" && dir != "." {
		c.File = filepath.Join(dir, filepath.FromSlash(c.File))
	}
	return &c
}

// validate implements `reconciler validate [DIR]`.
func (a *app) validate(args []string) int {
	fs := a.flagSet("validate", "[--config FILE] [DIR]")
	strategy := strategyFlag(fs, "merge-default")
	cfgPath := fs.String("config", "", "a node's config `FILE`: its [policy] merge_default and [validation] limits apply")
	if code, ok := a.parse(fs, args, 0, 1); !ok {
		return code
	}
	st, err := parseStrategy(*strategy)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler validate: --merge-default: %v\n", err)
		return exitUsage
	}
	var child *sandbox.Runner
	if a.self != "" {
		child = &sandbox.Runner{Path: a.self}
	}
	if *cfgPath != "" {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			fmt.Fprintf(a.stderr, "reconciler validate: %v\n", err)
			return exitUsage
		}
		if !flagSet(fs, "merge-default") {
			st = cfg.Policy.MergeDefault
		}
		if child != nil {
			child.MemoryLimit, child.Timeout = uint64(cfg.Validation.MemoryLimitBytes), cfg.Validation.Timeout.Duration
		}
	}
	dir := dirArg(fs)
	v, ok := checkTree(a.stderr, dir, st, child)
	passed := 0
	for _, r := range v.Tests {
		if r.Passed {
			passed++
		}
	}
	if !ok || !v.Valid() {
		fmt.Fprintf(a.stderr, "%s found; %d policies valid, %d tests passed\n", plural(max(len(v.Problems), 1), "problem"), len(v.Policies), passed)
		return exitCheck
	}
	for _, l := range v.Lists {
		fmt.Fprintln(a.stdout, engine.FormatListStat(l))
	}
	fmt.Fprintf(a.stdout, "%d policies, %d rules, %d tests passed\n", len(v.Policies), countRules(v.Policies), passed)
	return exitOK
}

// test implements `reconciler test [DIR]`: one PASS/FAIL line per test.
func (a *app) test(args []string) int {
	fs := a.flagSet("test", "[DIR]")
	strategy := strategyFlag(fs, "merge-default")
	if code, ok := a.parse(fs, args, 0, 1); !ok {
		return code
	}
	st, err := parseStrategy(*strategy)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler test: --merge-default: %v\n", err)
		return exitUsage
	}
	dir := dirArg(fs)
	v, ok := checkTree(a.stderr, dir, st, nil)
	passed, failed := 0, 0
	for _, r := range v.Tests {
		if r.Passed {
			passed++
			fmt.Fprintf(a.stdout, "PASS %s/%s\n", r.Policy, r.Name)
			continue
		}
		failed++
		e := &policy.Error{File: r.Pos.File, Line: r.Pos.Line, Msg: fmt.Sprintf("test %q of policy %q: %s", r.Name, r.Policy, r.Message)}
		fmt.Fprintf(a.stdout, "FAIL %s/%s %s\n", r.Policy, r.Name, relocate(dir, e).Error())
	}
	fmt.Fprintf(a.stdout, "%d tests: %d ok, %d failing\n", passed+failed, passed, failed)
	if !ok || !v.Valid() {
		return exitCheck
	}
	return exitOK
}

// plural writes "1 problem" or "3 problems".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func dirArg(fs *flag.FlagSet) string {
	if fs.NArg() == 0 {
		return "."
	}
	return fs.Arg(0)
}

// validateWorker implements the hidden `reconciler validate-worker LIMIT`:
// the child of sandbox.Runner, limited to LIMIT more bytes of memory.
func (a *app) validateWorker(args []string) int {
	limit, ok := a.workerLimit(sandbox.WorkerCommand, args)
	if !ok {
		return exitUsage
	}
	if err := sandbox.Serve(a.stdin, a.stdout, limit); err != nil {
		fmt.Fprintf(a.stderr, "reconciler %s: %v\n", sandbox.WorkerCommand, err)
		return exitCheck
	}
	return exitOK
}

// flagSet reports whether the command line set flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
