package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/cluster"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

func nodesCommands() []subcommand {
	return []subcommand{
		{"list", "", "the registered nodes: group, state, role, generation, heartbeat", (*app).nodesList},
		{"get", "ID", "one node, with why it is held or left behind", (*app).nodesGet},
		{"state", "STATE (--group G [--subgroup S] | --name ID)", "set the nodes in scope ACTIVE, TEST, SAFE, PASSIVE or TERMINATED", (*app).nodesState},
		{"health", "(--group G [--subgroup S] | --name ID)", "ask the nodes in scope to check themselves", (*app).nodesHealth},
	}
}

// nodes implements `reconciler nodes list|get|state|health`: ONAP's PDP
// state changes and health checks, scoped by group, subgroup or name.
func (a *app) nodes(args []string) int {
	return a.group("nodes", "The cluster's nodes: list them, change their state, check their health (ONAP scopes).",
		nodesCommands(), args)
}

func (a *app) nodesList(args []string) int {
	fs := a.flagSet("nodes list", "")
	return showAnswer(a, fs, args, 0, 0, "reader", func(c *apiClient) ([]byte, error) {
		return c.get(a.ctx, "/v1/nodes")
	}, func(w io.Writer, v *apiv1.NodeList) {
		if len(v.Nodes) == 0 {
			fmt.Fprintln(w, "No nodes registered.")
			return
		}
		printNodes(w, v.Nodes, time.Now())
	})
}

func (a *app) nodesGet(args []string) int {
	fs := a.flagSet("nodes get", "ID")
	return showAnswer(a, fs, args, 1, 1, "reader", func(c *apiClient) ([]byte, error) {
		return c.get(a.ctx, "/v1/nodes/"+seg(fs.Arg(0)))
	}, func(w io.Writer, n *apiv1.Node) { printNode(w, n, time.Now()) })
}

// printNode describes one node, field by field.
func printNode(w io.Writer, n *apiv1.Node, now time.Time) {
	printNodes(w, []apiv1.Node{*n}, now)
	tw := newTable(w)
	healthy := ""
	if n.Status != nil {
		healthy = n.Status.Healthy
		if n.Status.Version != "" {
			fmt.Fprintf(tw, "  Version:\t%s\n", n.Status.Version)
		}
	}
	fmt.Fprintf(tw, "  Health:\t%s\n  Applied index:\t%s\n", orDash(healthy), numOrDash(n.AppliedIndex))
	for _, r := range n.HeldReasons {
		fmt.Fprintf(tw, "  Held:\t%s\n", r)
	}
	tw.Flush()
}

// scopeFlags are the ONAP scope of a state change or a health check.
type scopeFlags struct{ group, subgroup, name string }

func addScopeFlags(fs *flag.FlagSet) *scopeFlags {
	s := &scopeFlags{}
	fs.StringVar(&s.group, "group", "", "every node of `GROUP`")
	fs.StringVar(&s.subgroup, "subgroup", "", "with --group: only its `SUBGROUP`")
	fs.StringVar(&s.name, "name", "", "the one node `ID`")
	return s
}

// check refuses what the API would refuse anyway, before a round trip.
func (s *scopeFlags) check() error {
	switch {
	case s.name != "" && (s.group != "" || s.subgroup != ""):
		return fmt.Errorf("--name goes without --group and --subgroup")
	case s.name == "" && s.group == "":
		return fmt.Errorf("give the scope: --group G [--subgroup S], or --name ID")
	case s.subgroup != "" && s.group == "":
		return fmt.Errorf("--subgroup needs --group")
	}
	return nil
}

func (a *app) nodesState(args []string) int {
	fs := a.flagSet("nodes state", "STATE (--group G [--subgroup S] | --name ID)")
	cf := addClientFlags(fs, "admin", defaultCallLimit)
	format := outputFlag(fs)
	scope := addScopeFlags(fs)
	if code, ok := a.parseRemote(fs, args, 1, 1, format); !ok {
		return code
	}
	if err := scope.check(); err != nil {
		fmt.Fprintf(a.stderr, "reconciler nodes state: %v\n", err)
		return exitUsage
	}
	req := cluster.ChangeStateRequest{State: raftstore.NodeState(strings.ToUpper(fs.Arg(0))),
		Group: scope.group, Subgroup: scope.subgroup, Name: scope.name}
	return a.remote(fs.Name(), cf, func(c *apiClient) error {
		body, err := c.idempotent().post(a.ctx, "/v1/nodes:changeState", req)
		if err != nil {
			return err
		}
		return printAnswer(a.stdout, *format, body, func(w io.Writer, r *apiv1.StateChangeList) {
			for _, ch := range r.Changed {
				fmt.Fprintf(w, "%s: %s -> %s\n", ch.ID, ch.From, ch.To)
			}
			for _, id := range r.Unchanged {
				fmt.Fprintf(w, "%s: already %s\n", id, req.State)
			}
		})
	})
}

func (a *app) nodesHealth(args []string) int {
	fs := a.flagSet("nodes health", "(--group G [--subgroup S] | --name ID)")
	cf := addClientFlags(fs, "admin", defaultCallLimit)
	format := outputFlag(fs)
	scope := addScopeFlags(fs)
	if code, ok := a.parseRemote(fs, args, 0, 0, format); !ok {
		return code
	}
	if err := scope.check(); err != nil {
		fmt.Fprintf(a.stderr, "reconciler nodes health: %v\n", err)
		return exitUsage
	}
	healthy := true
	code := a.remote(fs.Name(), cf, func(c *apiClient) error {
		body, err := c.idempotent().post(a.ctx, "/v1/nodes:healthCheck",
			cluster.HealthCheckRequest{Group: scope.group, Subgroup: scope.subgroup, Name: scope.name})
		if err != nil {
			return err
		}
		return printAnswer(a.stdout, *format, body, func(w io.Writer, r *apiv1.HealthReportList) {
			tw := newTable(w)
			fmt.Fprintln(tw, "ID\tHEALTH\tREASONS")
			for _, n := range r.Nodes {
				healthy = healthy && n.Healthy == "HEALTHY"
				fmt.Fprintf(tw, "%s\t%s\t%s\n", n.ID, n.Healthy, orDash(strings.Join(n.Reasons, "; ")))
			}
			tw.Flush()
		})
	})
	if code == exitOK && !healthy {
		return exitCheck // a script's `nodes health && deploy` stops at a sick node
	}
	return code
}
