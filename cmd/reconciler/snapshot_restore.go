package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/policyrollout/reconciler/internal/backup"
	"github.com/policyrollout/reconciler/internal/config"
)

// restoreTarget is the node a snapshot is restored for.
type restoreTarget struct {
	dataDir, nodeID, raftAddr string
	peers                     []raft.Server
}

func (a *app) snapshotRestore(args []string) int {
	fs := a.flagSet("snapshot restore", "FILE (--config FILE | --data-dir DIR --node-id ID --raft-addr ADDR) [--peers ID=ADDR,...] [--force]")
	cfgPath := fs.String("config", "", "the node's config `FILE`: node.id, node.data_dir and node.raft_addr (or raft_advertise_addr)")
	var t restoreTarget
	fs.StringVar(&t.dataDir, "data-dir", "", "the node's data `DIR` (node.data_dir); raft's directory is made inside it")
	fs.StringVar(&t.nodeID, "node-id", "", "the node's `ID` (node.id)")
	fs.StringVar(&t.raftAddr, "raft-addr", "", "the raft `ADDRESS` other nodes reach this one at")
	peers := fs.String("peers", "", "the voters of the restored cluster, `ID=ADDR,...`, this node included; "+
		"default: this node alone (a one-node cluster). Restore the same FILE on each of them")
	force := fs.Bool("force", false, "restore into a data directory that is not empty: its raft directory is moved aside, not deleted")
	file, code, ok := a.parseFile(fs, args)
	if !ok {
		return code
	}
	if err := t.complete(*cfgPath, *peers, setFlags(fs)); err != nil {
		fmt.Fprintf(a.stderr, "reconciler snapshot restore: %v\n", err)
		return exitUsage
	}
	if _, err := clearDataDir(t.dataDir, *force, time.Now(), true); err != nil {
		fmt.Fprintf(a.stderr, "reconciler snapshot restore: %v\n", err)
		return exitCheck
	}
	// The old raft directory moves aside only once the file is known good.
	prepare := func() error {
		moved, err := clearDataDir(t.dataDir, *force, time.Now(), false)
		if moved != "" {
			fmt.Fprintf(a.stdout, "moved the old raft directory aside to %s\n", moved)
		}
		return err
	}
	raftDir := filepath.Join(t.dataDir, raftDirName)
	h, err := backup.Restore(file, backup.RestoreOptions{RaftDir: raftDir, Servers: t.peers, Prepare: prepare})
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler snapshot restore: %s: %v\n", file, err)
		return exitCheck
	}
	fmt.Fprintf(a.stdout, "restored generation %s (raft index %d) into %s for %s; cluster:",
		generationLabel(h.ActiveGeneration, h.Commit), h.Index, t.dataDir, t.nodeID)
	for _, p := range t.peers {
		fmt.Fprintf(a.stdout, " %s=%s", p.ID, p.Address)
	}
	fmt.Fprintln(a.stdout, "\nstart the node(s) with `reconciler serve`: they serve this generation before a leader is elected")
	return exitOK
}

// complete fills the target from the config file where flags left it
// empty, and parses the peers.
func (t *restoreTarget) complete(cfgPath, peers string, set map[string]bool) error {
	if cfgPath != "" {
		c, err := config.Load(cfgPath)
		if err != nil {
			return err
		}
		addr := c.Node.RaftAdvertiseAddr
		if addr == "" {
			addr = c.Node.RaftAddr
		}
		for flagName, v := range map[string]*string{"data-dir": &t.dataDir, "node-id": &t.nodeID, "raft-addr": &t.raftAddr} {
			if !set[flagName] {
				*v = map[string]string{"data-dir": c.Node.DataDir, "node-id": c.Node.ID, "raft-addr": addr}[flagName]
			}
		}
	}
	if t.dataDir == "" || t.nodeID == "" {
		return fmt.Errorf("--data-dir and --node-id (or --config) are required")
	}
	self := raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(t.nodeID), Address: raft.ServerAddress(t.raftAddr)}
	if peers == "" {
		t.peers = []raft.Server{self}
		return checkPeerAddr(self)
	}
	for _, p := range strings.Split(peers, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(p), "=")
		s := raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}
		if !ok || id == "" {
			return fmt.Errorf("--peers: %q is not ID=ADDR", p)
		}
		if err := checkPeerAddr(s); err != nil {
			return err
		}
		if slices.ContainsFunc(t.peers, func(o raft.Server) bool { return o.ID == s.ID || o.Address == s.Address }) {
			return fmt.Errorf("--peers: %s or %s is listed twice", id, addr)
		}
		t.peers = append(t.peers, s)
	}
	if !slices.ContainsFunc(t.peers, func(o raft.Server) bool { return o.ID == self.ID }) {
		return fmt.Errorf("--peers must list this node (%s)", t.nodeID)
	}
	return nil
}

// checkPeerAddr refuses an address other nodes could not dial.
func checkPeerAddr(s raft.Server) error {
	host, port, err := net.SplitHostPort(string(s.Address))
	if err != nil || port == "0" || port == "" {
		return fmt.Errorf("raft address %q of %s is not HOST:PORT (give --raft-addr or --peers)", s.Address, s.ID)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("raft address %q of %s is a wildcard: give the address other nodes dial", s.Address, s.ID)
	}
	return nil
}

// clearDataDir makes sure dir may receive a restored raft directory: an
// absent or empty dir is fine; anything else needs force, and then only
// the raft directory is moved aside (to the returned path), never
// deleted. With dryRun it only checks.
func clearDataDir(dir string, force bool, now time.Time, dryRun bool) (string, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) || (err == nil && len(entries) == 0) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !force {
		return "", fmt.Errorf("data directory %s is not empty: stop the node and restore with --force "+
			"(its raft directory is moved aside), or give an empty directory", dir)
	}
	raftDir := filepath.Join(dir, raftDirName)
	if _, err := os.Stat(raftDir); os.IsNotExist(err) || dryRun {
		return "", nil
	}
	aside := fmt.Sprintf("%s.replaced-%s", raftDir, now.UTC().Format("20060102T150405.000000000Z"))
	if err := os.Rename(raftDir, aside); err != nil {
		return "", fmt.Errorf("move the old raft directory aside: %w", err)
	}
	return aside, nil
}
