package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
	"github.com/policyrollout/reconciler/internal/preview"
)

// status implements `reconciler status [--server URL] [--format text|json]`.
func (a *app) status(args []string) int {
	fs := a.flagSet("status", "[--server URL] [--format text|json]")
	cf := addClientFlags(fs, "reader", 10*time.Second)
	format := outputFlag(fs)
	if code, ok := a.parseRemote(fs, args, 0, 0, format); !ok {
		return code
	}
	return a.remote("status", cf, func(c *apiClient) error {
		body, err := c.get(a.ctx, "/v1/status")
		if err != nil {
			return err
		}
		return printAnswer(a.stdout, *format, body, func(w io.Writer, v *apiv1.Status) { printStatus(w, v, time.Now()) })
	})
}

// printStatus prints the cluster, the policies with their conditions,
// the experiments and the nodes, each table aligned.
func printStatus(w io.Writer, v *apiv1.Status, now time.Time) {
	leader := v.Leader
	if leader == "" {
		leader = "(none known)"
	}
	fmt.Fprintln(w, "Cluster")
	tw := newTable(w)
	fmt.Fprintf(tw, "  Node:\t%s\n  Leader:\t%s\n  Raft state:\t%s\n", v.NodeID, leader, v.RaftState)
	if v.ClusterVersion != "" {
		fmt.Fprintf(tw, "  Cluster version:\t%s (the lowest release among the members)\n", v.ClusterVersion)
	}
	fmt.Fprintf(tw, "  Active generation:\t%s\n", generationLabel(v.ActiveGeneration, v.Commit))
	if v.Author != "" { // the leader stored it without control characters
		fmt.Fprintf(tw, "  Author:\t%s\n", v.Author)
	}
	fmt.Fprintf(tw, "  Served here:\t%s\n", generationLabel(v.ServedGeneration, ""))
	if v.Source.Error != "" {
		fmt.Fprintf(tw, "  Source:\tPullError at %s: %s\n", stamp(v.Source.Time), firstLine(v.Source.Error))
	} else if v.Source.Commit != "" {
		fmt.Fprintf(tw, "  Source:\t%s (read %s)\n", v.Source.Commit, stamp(v.Source.Time))
	}
	if d := v.Source.Diverged; d != nil {
		fmt.Fprintf(tw, "  Diverged:\t%s does not descend from the active commit %s: nothing is promoted until `reconciler accept-history %s`\n",
			d.Commit, d.Active, d.Commit)
	}
	tw.Flush()

	fmt.Fprintln(w, "\nPolicies")
	if len(v.Policies) == 0 {
		fmt.Fprintln(w, "  none")
	} else {
		printConditions(w, v)
	}
	fmt.Fprintln(w, "\nExperiments")
	printExperiments(w, v.Experiments)
	if len(v.PreviewRules) > 0 {
		fmt.Fprintln(w, "\nRules in preview (counted as if enforced, never deciding)")
		printPreviewRules(w, v.PreviewRules)
	}
	fmt.Fprintln(w, "\nNodes")
	if len(v.Nodes) == 0 {
		fmt.Fprintln(w, "  none registered")
		return
	}
	printNodes(w, v.Nodes, now)
}

// printExperiments is the experiments table: branch records and the
// AIP-236 experiments; a row of a kind this build does not know is left
// out.
func printExperiments(w io.Writer, exps []apiv1.StatusExperiment) {
	if len(exps) == 0 {
		fmt.Fprintln(w, "  none")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "  NAME\tSOURCE\tHEAD\tCHANGED POLICIES\tETAG\tSTATE\tVALID")
	for _, row := range exps {
		switch {
		case row.Experiment != nil:
			printExperimentStatus(tw, row.Experiment)
		case row.Branch != nil:
			printBranchStatus(tw, row.Branch)
		}
	}
	tw.Flush()
}

// printBranchStatus is the row of a branch record.
func printBranchStatus(tw *table, b *apiv1.BranchStatus) {
	changed, valid := strings.Join(b.ChangedPolicies, ","), "yes"
	if !b.Validation.Valid {
		valid = "no"
		if len(b.Validation.Errors) > 0 {
			valid += ": " + firstLine(b.Validation.Errors[0])
		}
	}
	fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t-\t-\t%s\n", b.Name, orDash(b.Kind), orDash(shortHash(b.HeadCommit)), orDash(changed), valid)
}

// printExperimentStatus is the row of an AIP-236 experiment.
func printExperimentStatus(tw *table, e *apiv1.ExperimentStatus) {
	src := experimentSource(e.Source.Kind, e.Source.Number, e.Source.Branch)
	state := orDash(e.State)
	if !e.Previewed {
		state += " (not previewed)"
	}
	if e.StopReason != "" {
		state += " (" + e.StopReason + ")"
	}
	valid := "-" // no validation made
	switch {
	case e.Valid != nil && *e.Valid:
		valid = "yes"
	case e.Valid != nil:
		valid = "no"
	}
	fmt.Fprintf(tw, "  %s\t%s\t%s\t-\t%s\t%s\t%s\n", e.Name, src, orDash(shortHash(e.Source.HeadCommit)), orDash(e.Etag), state, valid)
}

// experimentSource names what an AIP experiment comes from:
// "pull_request #7", "branch feature/x" or "api".
func experimentSource(kind string, number int, branch string) string {
	switch {
	case kind == "pull_request" && number != 0:
		return fmt.Sprintf("%s #%d", kind, number)
	case kind == "branch" && branch != "":
		return kind + " " + branch
	}
	return orDash(kind)
}

// shortHash shortens a commit hash for a table.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// table is an aligned table whose lines lose the padding of empty last
// cells when flushed.
type table struct {
	w   io.Writer
	buf bytes.Buffer
	*tabwriter.Writer
}

func newTable(w io.Writer) *table {
	t := &table{w: w}
	t.Writer = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

func (t *table) Flush() {
	_ = t.Writer.Flush()
	for _, line := range strings.SplitAfter(t.buf.String(), "\n") {
		if line != "" {
			fmt.Fprintln(t.w, strings.TrimRight(line, " \n"))
		}
	}
	t.buf.Reset()
}

func printConditions(w io.Writer, v *apiv1.Status) {
	tw := newTable(w)
	fmt.Fprintln(tw, "  POLICY\tETAG\tCONDITION\tGENERATION\tNODE\tSINCE\tMESSAGE")
	for _, p := range v.Policies {
		name, etag := p.Name, orDash(p.Etag)
		if len(p.Conditions) == 0 {
			fmt.Fprintf(tw, "  %s\t%s\t-\t\t\t\t\n", name, etag)
		}
		for _, c := range p.Conditions {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, etag, c.Type, numOrDash(c.Generation),
				orDash(c.NodeID), stamp(c.LastTransitionTime), firstLine(c.Message))
			name, etag = "", ""
		}
	}
	tw.Flush()
}

func printNodes(w io.Writer, nodes []apiv1.Node, now time.Time) {
	tw := newTable(w)
	fmt.Fprintln(tw, "  ID\tRAFT ADDRESS\tHTTP ADDRESS\tGROUP\tSTATE\tROLE\tGENERATION\tDECISIONS (FAILED)\tLAST HEARTBEAT")
	for _, n := range nodes {
		role := "non-voter"
		switch {
		case n.Leader:
			role = "leader"
		case n.Voter:
			role = "voter"
		}
		hb := "-"
		if !n.LastHeartbeat.IsZero() {
			hb = fmt.Sprintf("%s (%s ago)", stamp(n.LastHeartbeat), now.Sub(n.LastHeartbeat).Round(100*time.Millisecond))
			if !n.Reachable {
				hb += ", unreachable"
			}
		}
		decisions := "-"
		if n.Status != nil {
			decisions = fmt.Sprintf("%d (%d)", n.Status.Statistics.PolicyExecutedCount, n.Status.Statistics.PolicyExecutedFail)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.RaftAddr, n.HTTPAddr,
			orDash(n.Group)+"/"+orDash(n.Subgroup), orDash(n.State), role, numOrDash(n.Generation), decisions, hb)
	}
	tw.Flush()
	for _, n := range nodes {
		for _, f := range n.LoadFailures {
			if len(f.Errors) > 0 {
				fmt.Fprintf(w, "  %s cannot load generation %d (left behind, out of rotation): %s\n", n.ID, f.Generation,
					firstLine(f.Errors[0]))
			}
		}
		if n.NotFollowing != "" {
			fmt.Fprintf(w, "  %s left behind, out of rotation: %s\n", n.ID, n.NotFollowing)
		}
	}
}

func generationLabel(n uint64, commit string) string {
	switch {
	case n == 0:
		return "none yet"
	case commit == "":
		return fmt.Sprint(n)
	default:
		return fmt.Sprintf("%d (%s)", n, commit)
	}
}

// firstLine shortens a multi-line message to its first line.
func firstLine(s string) string {
	first, rest, ok := strings.Cut(s, "\n")
	if !ok {
		return s
	}
	return fmt.Sprintf("%s (+%d more lines)", first, strings.Count(rest, "\n")+1)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func numOrDash(n uint64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func printPreviewRules(w io.Writer, rules []preview.RuleView) {
	tw := newTable(w)
	fmt.Fprintln(tw, "  RULE\tEVALUATED\tALLOW->DENY\tDENY->ALLOW\tRULE CHANGED\tDROPPED")
	for _, r := range rules {
		switch {
		case !r.Previewed:
			fmt.Fprintf(tw, "  %s\tnot previewed: %s\t\t\t\t\n", r.Name, r.Reason)
		case r.Stats == nil:
			fmt.Fprintf(tw, "  %s\t0\t0\t0\t0\t0\n", r.Name)
		default:
			s := r.Stats
			fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\n", r.Name, s.Evaluated, s.AllowToDeny, s.DenyToAllow, s.RuleChanged, s.Dropped)
		}
	}
	tw.Flush()
}
