package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
	"github.com/policyrollout/reconciler/internal/preview"
)

// replay implements `reconciler replay --live DIR --experiment DIR
// --traffic FILE.jsonl [--format text|markdown|json]`: both policies over
// recorded requests, and a summary of the differences. Leaving out --live
// previews a new policy; leaving out --experiment previews a deletion.
// It exits 1 when a --max-*-ratio threshold is exceeded or the input is
// bad, 2 on usage errors.
func (a *app) replay(args []string) int {
	fs := a.flagSet("replay", "--live DIR --experiment DIR --traffic FILE.jsonl [--format text|markdown|json]")
	live := fs.String("live", "", "live policy `DIR`; omit to preview a new policy")
	exp := fs.String("experiment", "", "experiment policy `DIR`; omit to preview a deletion")
	traffic := fs.String("traffic", "", "recorded requests, one JSON object per line (`FILE`, or - for standard input)")
	format := fs.String("format", "text", "output `format`: text, markdown or json")
	redact := fs.String("redact", "", "more comma-separated dotted request `paths` to redact (headers.authorization and headers.cookie always are)")
	th := thresholdFlags(fs)
	strategy := strategyFlag(fs, "merge-default")
	if code, ok := a.parse(fs, args, 0, 0); !ok {
		return code
	}
	if code, ok := a.replayUsage(fs, *live, *exp, *traffic, *format); !ok {
		return code
	}
	st, err := parseStrategy(*strategy)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler replay: --merge-default: %v\n", err)
		return exitUsage
	}
	liveCP, expCP, ok := a.compilePair(*live, *exp, st)
	if !ok {
		return exitCheck
	}
	opts := preview.ReplayOptions{Redact: redactPaths(*redact), Thresholds: th.thresholds(fs)}
	sum, err := a.replayTraffic(liveCP, expCP, *traffic, opts)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler replay: %v\n", err)
		return exitCheck
	}
	if err := renderSummary(a.stdout, *format, sum); err != nil {
		fmt.Fprintf(a.stderr, "reconciler replay: %v\n", err)
		return exitCheck
	}
	if sum.Failing {
		fmt.Fprintf(a.stderr, "reconciler replay: %s: %s\n", sum.Policy, sum.Reason)
		return exitCheck
	}
	return exitOK
}

// replayUsage checks the flag combination.
func (a *app) replayUsage(fs *flag.FlagSet, live, exp, traffic, format string) (int, bool) {
	var msg string
	switch {
	case traffic == "":
		msg = "--traffic is required"
	case live == "" && exp == "":
		msg = "--live, --experiment or both are required"
	case format != "text" && format != "markdown" && format != "json":
		msg = fmt.Sprintf("--format %q must be text, markdown or json", format)
	}
	if msg == "" {
		return exitOK, true
	}
	fmt.Fprintf(a.stderr, "reconciler replay: %s\n", msg)
	fs.Usage()
	return exitUsage, false
}

// compilePair loads and compiles the given sides; a side not given is nil.
func (a *app) compilePair(live, exp string, st policy.Strategy) (l, e *engine.CompiledPolicy, ok bool) {
	if live != "" {
		if l, ok = a.compileOne(live, st); !ok {
			return nil, nil, false
		}
	}
	if exp != "" {
		if e, ok = a.compileOne(exp, st); !ok {
			return nil, nil, false
		}
	}
	return l, e, true
}

func (a *app) replayTraffic(live, exp *engine.CompiledPolicy, name string, opts preview.ReplayOptions) (preview.Summary, error) {
	var r io.Reader = a.stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return preview.Summary{}, err
		}
		defer f.Close()
		r = f
	}
	return preview.ReplayFileWith(live, exp, r, opts)
}

// redactPaths adds the --redact paths to the defaults, which are always
// redacted: a summary may end up in a public pull request comment.
func redactPaths(extra string) []string {
	paths := append([]string(nil), preview.DefaultRedact...)
	for p := range strings.SplitSeq(extra, ",") {
		if p = strings.TrimSpace(p); p != "" {
			paths = append(paths, p)
		}
	}
	return paths
}

func renderSummary(w io.Writer, format string, s preview.Summary) error {
	switch format {
	case "markdown":
		return preview.RenderMarkdown(w, preview.Report{Title: "Policy replay", Summaries: []preview.Summary{s}})
	case "json":
		return preview.RenderJSON(w, []preview.Summary{s})
	}
	return preview.RenderText(w, []preview.Summary{s})
}

// thresholdValues holds the threshold flags; only flags given count.
type thresholdValues struct {
	allowToDeny, denyToAllow *float64
}

func thresholdFlags(fs *flag.FlagSet) thresholdValues {
	return thresholdValues{
		allowToDeny: fs.Float64("max-allow-to-deny-ratio", 0, "exit 1 when more than this `ratio` (0 to 1) of requests go from ALLOW to DENY"),
		denyToAllow: fs.Float64("max-deny-to-allow-ratio", 0, "exit 1 when more than this `ratio` (0 to 1) of requests go from DENY to ALLOW"),
	}
}

func (t thresholdValues) thresholds(fs *flag.FlagSet) preview.Thresholds {
	set := setFlags(fs)
	var th preview.Thresholds
	if set["max-allow-to-deny-ratio"] {
		th.MaxAllowToDenyRatio = t.allowToDeny
	}
	if set["max-deny-to-allow-ratio"] {
		th.MaxDenyToAllowRatio = t.denyToAllow
	}
	return th
}
