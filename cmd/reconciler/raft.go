package main

import (
	"fmt"
	"io"

	"github.com/policyrollout/reconciler/internal/cluster"
)

func raftCommands() []subcommand {
	return []subcommand{
		{"peers", "", "the leader's raft configuration: id, address, suffrage, leader", (*app).raftPeers},
		{"remove", "[--force] ID", "remove a dead voter (stopped, unreachable) from the configuration", (*app).raftRemove},
		{"transfer-leadership", "[ID]", "hand leadership to voter ID, or to the voter raft picks", (*app).raftTransfer},
	}
}

// raft implements `reconciler raft peers|remove|transfer-leadership`, as
// Consul's `operator raft` does. Every verb needs an admin token.
func (a *app) raft(args []string) int {
	return a.group("raft", "The raft configuration: list peers, remove a dead voter, transfer leadership.", raftCommands(), args)
}

func (a *app) raftPeers(args []string) int {
	fs := a.flagSet("raft peers", "")
	return showAnswer(a, fs, args, 0, 0, "admin", func(c *apiClient) ([]byte, error) {
		return c.get(a.ctx, "/v1/raft/peers")
	}, func(w io.Writer, r *cluster.RaftPeersResponse) {
		tw := newTable(w)
		fmt.Fprintln(tw, "ID\tADDRESS\tSUFFRAGE\tLEADER\tREACHABLE")
		for _, p := range r.Peers {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%t\n", p.ID, p.Address, p.Suffrage, p.Leader, p.Reachable)
		}
		tw.Flush()
	})
}

func (a *app) raftRemove(args []string) int {
	fs := a.flagSet("raft remove", "[--force] ID")
	cf := addClientFlags(fs, "admin", defaultCallLimit)
	force := fs.Bool("force", false, "remove it even while the leader hears from it or reaches it")
	if code, ok := a.parse(fs, args, 1, 1); !ok {
		return code
	}
	id := fs.Arg(0)
	code := a.remote(fs.Name(), cf, func(c *apiClient) error {
		_, err := c.post(a.ctx, "/v1/raft:removePeer", cluster.RemovePeerRequest{ID: id, Force: *force})
		return err
	})
	if code == exitOK {
		fmt.Fprintf(a.stdout, "Removed %s from the raft configuration and the node registry.\n", id)
	}
	return code
}

func (a *app) raftTransfer(args []string) int {
	fs := a.flagSet("raft transfer-leadership", "[ID]")
	return showAnswer(a, fs, args, 0, 1, "admin", func(c *apiClient) ([]byte, error) {
		return c.post(a.ctx, "/v1/raft:transferLeadership", cluster.TransferRequest{ID: fs.Arg(0)})
	}, func(w io.Writer, r *cluster.TransferResponse) {
		if r.Leader == "" {
			fmt.Fprintf(w, "%s handed leadership on; the new leader is not known yet (see `reconciler raft peers`).\n", r.From)
			return
		}
		fmt.Fprintf(w, "Leadership moved from %s to %s.\n", r.From, r.Leader)
	})
}
