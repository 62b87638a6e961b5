package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/gitsource"
	"github.com/policyrollout/reconciler/internal/logging"
	"github.com/policyrollout/reconciler/internal/node"
	"github.com/policyrollout/reconciler/internal/sandbox"
)

// serveFlags are the command-line overrides of config.toml's [node] keys.
type serveFlags struct {
	config    string
	nodeID    string
	httpAddr  string
	raftAddr  string
	dataDir   string
	bootstrap bool
	join      []string
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.config, "config", "config.toml", "config `FILE`")
	fs.StringVar(&f.nodeID, "node-id", "", "override node.id")
	fs.StringVar(&f.httpAddr, "http-addr", "", "override node.http_addr (`host:port`)")
	fs.StringVar(&f.raftAddr, "raft-addr", "", "override node.raft_addr (`host:port`)")
	fs.StringVar(&f.dataDir, "data-dir", "", "override node.data_dir (`DIR`, relative to the working directory)")
	fs.BoolVar(&f.bootstrap, "bootstrap", false, "override node.bootstrap")
	fs.Func("join", "override node.join: `ADDR` of a member (repeat, or separate with commas)", func(v string) error {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				f.join = append(f.join, s)
			}
		}
		return nil
	})
}

// apply puts the flags that were given over the file's values.
func (f *serveFlags) apply(c *config.Config, set map[string]bool) error {
	if set["node-id"] {
		c.Node.ID = f.nodeID
	}
	if set["http-addr"] {
		c.Node.HTTPAddr = f.httpAddr
	}
	if set["raft-addr"] {
		c.Node.RaftAddr = f.raftAddr
	}
	if set["data-dir"] {
		abs, err := filepath.Abs(f.dataDir)
		if err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
		c.Node.DataDir = abs
	}
	if set["join"] {
		c.Node.Join = f.join
		// Joining implies not bootstrapping, unless the flag says otherwise.
		if !set["bootstrap"] {
			c.Node.Bootstrap = false
		}
	}
	if set["bootstrap"] {
		c.Node.Bootstrap = f.bootstrap
	}
	return c.Validate()
}

// serve runs a node until SIGINT or SIGTERM, then stops it gracefully.
func (a *app) serve(args []string) int {
	fs := a.flagSet("serve", "--config FILE [flags]")
	var f serveFlags
	f.register(fs)
	if code, ok := a.parse(fs, args, 0, 0); !ok {
		return code
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler serve: %v\n", err)
		return exitCheck
	}
	if err := f.apply(cfg, setFlags(fs)); err != nil {
		fmt.Fprintf(a.stderr, "reconciler serve: %v\n", err)
		return exitUsage
	}
	logger := logging.New(cfg.Log, a.stderr)
	ctx, stop := signal.NotifyContext(a.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	if path := os.Getenv(cpuProfileEnv); path != "" {
		stopProfile, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintf(a.stderr, "reconciler serve: %v\n", err)
			return exitUsage
		}
		defer stopProfile()
	}
	if path := os.Getenv(heapProfileEnv); path != "" {
		heapProfileOnSignal(ctx, path, func(format string, args ...any) { logger.Error(fmt.Sprintf(format, args...)) })
	}

	m := &node.Main{Config: cfg, Logger: logger, Version: version}
	if a.self != "" {
		r := sandbox.Runner{Path: a.self, MemoryLimit: uint64(cfg.Validation.MemoryLimitBytes),
			Timeout: cfg.Validation.Timeout.Duration}
		// Trees go to one long-lived child that derives a changed list
		// from the last; a policy check is a one-off child, so it never
		// waits behind a tree.
		w := &sandbox.Worker{Runner: r}
		defer w.Close()
		m.Validator, m.CheckPolicy = w.Validate, r.CheckPolicy
		m.Repack = gitsource.RepackChild{Path: a.self, MemoryLimit: uint64(cfg.Git.RepackMemoryLimitBytes)}
	}
	if err := m.Run(ctx); err != nil {
		logger.Error("node failed to start", "error", err)
		return exitCheck
	}
	if err := m.Wait(); errors.Is(err, node.ErrTerminated) {
		return exitOK // an admin set it TERMINATED: a stop, not a failure to restart from
	} else if err != nil {
		logger.Error("node stopped with an error", "error", err)
		return exitCheck
	}
	return exitOK
}

// cpuProfileEnv names a file the node writes its CPU profile to, from start
// to a graceful stop (scripts/bench-http.sh, BENCH_PROFILE). It is set by
// whoever starts the process, never over the network, so the API exposes no
// profiling endpoint.
const cpuProfileEnv = "RECONCILER_CPUPROFILE"

func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", cpuProfileEnv, err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}
