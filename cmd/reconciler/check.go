package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
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

// checked is what loading and compiling a policies root produced.
type checked struct {
	compiled []*engine.CompiledPolicy
	rules    int
	problems int
}

// loadAndCompile loads every policy under dir and compiles each, printing
// every problem to w as file:line: message. Policies that load and compile
// are returned even when others do not, so their tests still run.
func loadAndCompile(w io.Writer, dir string, strategy policy.Strategy) checked {
	var c checked
	repo, err := policy.Load(os.DirFS(dir), policy.LoadOptions{MergeDefault: strategy})
	if err != nil {
		c.problems += printErrors(w, dir, err)
	}
	if repo == nil {
		return c
	}
	for _, p := range repo.Policies {
		cp, err := engine.Compile(p, engine.DefaultOptions())
		if err != nil {
			c.problems += printErrors(w, dir, err)
			continue
		}
		c.compiled = append(c.compiled, cp)
		c.rules += len(p.Rules)
	}
	return c
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

// testFailure describes a failed policy test as file:line: message.
func testFailure(dir string, r engine.TestResult) string {
	e := &policy.Error{File: r.Pos.File, Line: r.Pos.Line, Msg: fmt.Sprintf("test %q of policy %q: %s", r.Name, r.Policy, r.Message)}
	return relocate(dir, e).Error()
}

// validate implements `reconciler validate [DIR]`.
func (a *app) validate(args []string) int {
	fs := a.flagSet("validate", "[DIR]")
	strategy := strategyFlag(fs, "merge-default")
	if code, ok := a.parse(fs, args, 0, 1); !ok {
		return code
	}
	st, err := parseStrategy(*strategy)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler validate: --merge-default: %v\n", err)
		return exitUsage
	}
	dir := dirArg(fs)
	c := loadAndCompile(a.stderr, dir, st)
	passed := 0
	for _, cp := range c.compiled {
		for _, r := range engine.RunTests(cp) {
			if r.Passed {
				passed++
				continue
			}
			c.problems++
			fmt.Fprintln(a.stderr, testFailure(dir, r))
		}
	}
	if c.problems > 0 {
		fmt.Fprintf(a.stderr, "%s found; %d policies valid, %d tests passed\n", plural(c.problems, "problem"), len(c.compiled), passed)
		return exitCheck
	}
	fmt.Fprintf(a.stdout, "%d policies, %d rules, %d tests passed\n", len(c.compiled), c.rules, passed)
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
	c := loadAndCompile(a.stderr, dir, st)
	passed, failed := 0, 0
	for _, cp := range c.compiled {
		for _, r := range engine.RunTests(cp) {
			if r.Passed {
				passed++
				fmt.Fprintf(a.stdout, "PASS %s/%s\n", r.Policy, r.Name)
				continue
			}
			failed++
			fmt.Fprintf(a.stdout, "FAIL %s/%s %s\n", r.Policy, r.Name, testFailure(dir, r))
		}
	}
	fmt.Fprintf(a.stdout, "%d tests: %d ok, %d failing\n", passed+failed, passed, failed)
	if failed > 0 || c.problems > 0 {
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
