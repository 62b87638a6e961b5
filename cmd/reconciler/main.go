// Command reconciler is the GitOps policy reconciler: a daemon (serve) and
// the tools around it (validate, test, merge, eval, status, rollback, snapshot, certs). See CONTRACT.md §2 and
// `reconciler help`. main only parses flags and wires internal packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"

	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/sandbox"
	rversion "github.com/policyrollout/reconciler/internal/version"
)

// version is the release (internal/version.Current); commit is set by
// the Makefile (-X main.commit=abc123), else read from what go build
// embeds of the checkout (buildCommit).
var (
	version = rversion.Current
	commit  = ""
)

// Exit codes of CONTRACT.md §2.
const (
	exitOK    = 0
	exitCheck = 1 // the checked thing is wrong (invalid policy, failing test)
	exitUsage = 2 // unknown command, bad flag, missing argument
)

func main() {
	a := &app{ctx: context.Background(), stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr}
	// Only the real binary can run itself as a validate-worker: tests call
	// run, from a test binary, and validate in their own process.
	if exe, err := os.Executable(); err == nil {
		a.self = exe
	}
	os.Exit(a.run(os.Args[1:]))
}

// run executes one command line and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	a := &app{ctx: context.Background(), stdin: os.Stdin, stdout: stdout, stderr: stderr}
	return a.run(args)
}

// app is one invocation: its streams and the context serve runs under.
type app struct {
	ctx    context.Context
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	// self is this reconciler binary, run as `validate-worker` to validate
	// trees in a child process; "" validates in this process.
	self string
}

// command is one subcommand.
type command struct {
	name    string
	args    string // argument synopsis for help
	summary string
	run     func(a *app, args []string) int
}

func commands() []command {
	return []command{
		{"serve", "--config FILE [flags]", "run a node", (*app).serve},
		{"validate", "[DIR]", "parse, merge, compile and test every policy under DIR", (*app).validate},
		{"test", "[DIR]", "run the policy tests under DIR", (*app).test},
		{"merge", "[--strategy S] [--format F] FILE...", "merge policy files into one policy on stdout", (*app).merge},
		{"eval", "--policy DIR [--input FILE|-]", "one decision for one request JSON", (*app).eval},
		{"replay", "--live DIR --experiment DIR --traffic F", "offline preview: both policies over recorded requests", (*app).replay},
		{"status", "[--server URL] [--format F]", "cluster, generation, policy conditions and nodes of a running cluster", (*app).status},
		{"rollback", "[--server URL] [--to N] [--wait D]", "revert main to generation N's policies and promote the revert", (*app).rollback},
		{"snapshot", "save|inspect|restore FILE [flags]", "back up the cluster's state, check a backup, seed a node from one", (*app).snapshot},
		{"accept-history", "[--server URL] COMMIT", "let the leader promote a live branch that no longer descends from the active generation", (*app).acceptHistory},
		{"experiments", "list|get|create|start|stop|commit|delete|diff", "a policy's experiments over the API", (*app).experiments},
		{"operations", "list|get|wait|cancel", "the long-running operations of experiment writes", (*app).operations},
		{"nodes", "list|get|state|health", "the cluster's nodes: states and health checks by group, subgroup or name", (*app).nodes},
		{"raft", "peers|remove|transfer-leadership", "the raft configuration: peers, removing a dead voter, leadership", (*app).raft},
		{"certs", "ca|node [flags]", "create a cluster CA and node certificates for [tls]", (*app).certs},
		{"version", "", "print version, commit and Go version", (*app).version},
		{"help", "[COMMAND]", "list commands, or show a command's flags", (*app).help},
	}
}

func (a *app) run(args []string) int {
	if len(args) == 0 {
		a.usage(a.stderr)
		return exitUsage
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "-help" {
		name = "help"
	}
	if name == sandbox.WorkerCommand { // hidden: not in help
		return a.validateWorker(args[1:])
	}
	if name == gitsource.RepackCommand { // hidden: not in help
		return a.repackWorker(args[1:])
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(a, args[1:])
		}
	}
	fmt.Fprintf(a.stderr, "reconciler: unknown command %q\n\n", args[0])
	a.usage(a.stderr)
	return exitUsage
}

func (a *app) usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: reconciler <command> [flags]")
	fmt.Fprintln(w, "\nCommands:")
	tw := newTable(w)
	for _, c := range commands() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", c.name, c.args, c.summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nRun 'reconciler help COMMAND' for a command's flags.")
}

func (a *app) help(args []string) int {
	if len(args) == 0 {
		a.usage(a.stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] && c.name != "help" {
			// Every command prints its flags when asked for -h.
			a2 := *a
			a2.stderr = a.stdout
			c.run(&a2, []string{"-h"})
			return exitOK
		}
	}
	fmt.Fprintf(a.stderr, "reconciler help: unknown command %q\n", args[0])
	return exitUsage
}

func (a *app) version(args []string) int {
	fs := a.flagSet("version", "")
	if code, ok := a.parse(fs, args, 0, 0); !ok {
		return code
	}
	fmt.Fprintf(a.stdout, "version: %s\ncommit: %s\ngo: %s %s/%s\n", version, buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}

// buildCommit is the commit set at link time, else the one go build
// embedded from the checkout (with "-dirty" for local changes), else
// "unknown" (go run, or a build outside a checkout).
func buildCommit() string {
	if commit != "" {
		return commit
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	switch {
	case rev == "":
		return "unknown"
	case dirty:
		return rev + "-dirty"
	}
	return rev
}

// flagSet returns a FlagSet that reports to stderr and lists its flags in
// its usage text.
func (a *app) flagSet(name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: reconciler %s %s\n", name, synopsis)
		if hasFlags(fs) {
			fmt.Fprintln(fs.Output(), "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parse parses args and checks the number of positional arguments
// (max < 0: any). It returns (exit code, false) when the command must stop.
func (a *app) parse(fs *flag.FlagSet, args []string, min, max int) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, false
		}
		return exitUsage, false
	}
	n := fs.NArg()
	if n < min || (max >= 0 && n > max) {
		fmt.Fprintf(a.stderr, "reconciler %s: wrong number of arguments\n", fs.Name())
		fs.Usage()
		return exitUsage, false
	}
	return exitOK, true
}

// setFlags returns the names of the flags given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// sortedKeys returns m's keys in order, for stable output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
