package main

import (
	"flag"
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
)

// subcommand is one verb of a command group (`experiments list`).
type subcommand struct {
	name    string
	args    string
	summary string
	run     func(a *app, args []string) int
}

// group dispatches `reconciler NAME VERB ...` to the verb's subcommand;
// -h, or no verb, lists the verbs and the connection flags they share.
func (a *app) group(name, summary string, subs []subcommand, args []string) int {
	if len(args) > 0 {
		for _, s := range subs {
			if s.name == args[0] {
				return s.run(a, args[1:])
			}
		}
	}
	w := a.stderr
	code := exitUsage
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help" || args[0] == "help") {
		code = exitOK
	} else if len(args) > 0 {
		fmt.Fprintf(w, "reconciler %s: unknown verb %q\n\n", name, args[0])
	}
	fmt.Fprintf(w, "Usage: reconciler %s <verb> [flags] ARGS\n\n%s\n\nVerbs:\n", name, summary)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, s := range subs {
		fmt.Fprintf(tw, "  %s %s\t%s\n", s.name, s.args, s.summary)
	}
	_ = tw.Flush()
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	addClientFlags(fs, "see each verb", defaultCallLimit)
	outputFlag(fs)
	fmt.Fprintln(w, "\nFlags every verb takes:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nRun 'reconciler %s VERB -h' for a verb's own flags.\n", name)
	return code
}

// seg escapes one path segment taken from the command line, so that an
// argument such as "../x" stays inside the resource it names.
func seg(s string) string { return url.PathEscape(s) }

// experimentPath is the path of policies/{p}/experiments[/{id}].
func experimentPath(policy, id string) string {
	p := "/v1/policies/" + seg(policy) + "/experiments"
	if id != "" {
		p += "/" + seg(id)
	}
	return p
}

// operationID accepts "ID" and "operations/ID".
func operationID(s string) string { return strings.TrimPrefix(s, "operations/") }

// ago says how long before now t was, for a table.
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return d.Round(time.Second).String()
	case d < time.Hour:
		return d.Round(time.Minute).String()
	case d < 48*time.Hour:
		return d.Round(time.Hour).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
