package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
)

// maxPolicyFile bounds a policy file given to `experiments create`; the
// API refuses bodies far smaller than this anyway.
const maxPolicyFile = 8 << 20

// experimentState is an experiment's preview state, NEW before the
// first startPreview.
func experimentState(e *apiv1.Experiment) string {
	if e.PreviewMetadata == nil || e.PreviewMetadata.State == "" {
		return "NEW"
	}
	return e.PreviewMetadata.State
}

// experimentValid says whether the experiment passed validation, with
// its tests.
func experimentValid(e *apiv1.Experiment) string {
	v := e.Validation
	switch {
	case v == nil:
		return "-"
	case !v.Valid:
		return "no"
	case v.Tests != nil:
		return fmt.Sprintf("yes (%d/%d tests)", v.Tests.Passed, v.Tests.Total)
	}
	return "yes"
}

func experimentsCommands() []subcommand {
	return []subcommand{
		{"list", "POLICY", "the experiments of a policy", (*app).experimentsList},
		{"get", "POLICY ID", "one experiment with its stats", (*app).experimentsGet},
		{"create", "[--id ID] --file FILE POLICY", "create an experiment from a policy's JSON", (*app).experimentsCreate},
		{"start", "POLICY ID", "start previewing it on mirrored traffic", (*app).experimentsStart},
		{"stop", "POLICY ID", "stop previewing it", (*app).experimentsStop},
		{"commit", "[--wait] POLICY ID", "commit it to the live branch; --wait returns once its generation is ACTIVE", (*app).experimentsCommit},
		{"delete", "POLICY ID", "delete it", (*app).experimentsDelete},
		{"diff", "POLICY ID", "what it changes in the live policy, rule by rule", (*app).experimentsDiff},
	}
}

// experiments implements `reconciler experiments VERB ...` over the
// AIP-236 experiment resources of docs/api.md.
func (a *app) experiments(args []string) int {
	return a.group("experiments", "The experiments (AIP-236) of a policy: previews of a changed policy on mirrored traffic.",
		experimentsCommands(), args)
}

func (a *app) experimentsList(args []string) int {
	fs := a.flagSet("experiments list", "POLICY")
	filter := fs.String("filter", "", "`filter`, e.g. \"preview_metadata.state = ACTIVE\"")
	return showAnswer(a, fs, args, 1, 1, "reader", func(c *apiClient) ([]byte, error) {
		return listAll(a.ctx, c, experimentPath(fs.Arg(0), ""), *filter, "experiments")
	}, func(w io.Writer, v *apiv1.ExperimentList) {
		printExperimentList(w, v.Experiments, time.Now())
	})
}

func printExperimentList(w io.Writer, exps []apiv1.Experiment, now time.Time) {
	if len(exps) == 0 {
		fmt.Fprintln(w, "No experiments.")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tSOURCE\tSTATE\tVALID\tEVALUATED\tALLOW->DENY\tDENY->ALLOW\tETAG\tAGE")
	for i := range exps {
		e := &exps[i]
		var eval, a2d, d2a uint64
		if e.Stats != nil {
			eval, a2d, d2a = e.Stats.Evaluated, e.Stats.AllowToDeny, e.Stats.DenyToAllow
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", e.Name,
			experimentSource(e.Source.Kind, e.Source.Number, e.Source.Branch), experimentState(e), experimentValid(e), eval, a2d, d2a,
			orDash(shortHash(e.Etag)), ago(e.CreateTime, now))
	}
	tw.Flush()
}

func printExperiment(w io.Writer, e *apiv1.Experiment) {
	tw := newTable(w)
	fmt.Fprintf(tw, "Name:\t%s\nEtag:\t%s\nSource:\t%s\n", e.Name, orDash(e.Etag),
		experimentSource(e.Source.Kind, e.Source.Number, e.Source.Branch))
	if e.Source.HeadCommit != "" {
		fmt.Fprintf(tw, "Head commit:\t%s\n", e.Source.HeadCommit)
	}
	fmt.Fprintf(tw, "State:\t%s\nValid:\t%s\nCreated:\t%s\n", experimentState(e), experimentValid(e), stamp(e.CreateTime))
	if !e.Previewed && e.Reason != "" {
		fmt.Fprintf(tw, "Not previewed:\t%s\n", e.Reason)
	}
	if e.Conflict != "" {
		fmt.Fprintf(tw, "Conflict:\t%s\n", firstLine(e.Conflict))
	}
	if s := e.Stats; s != nil {
		fmt.Fprintf(tw, "Evaluated:\t%d (allow->deny %d, deny->allow %d, errors %d, dropped %d)\n",
			s.Evaluated, s.AllowToDeny, s.DenyToAllow, s.Errors, s.Dropped)
	}
	if e.Summary != nil && e.Summary.Failing {
		fmt.Fprintf(tw, "Thresholds:\tfailing: %s\n", e.Summary.Reason)
	}
	tw.Flush()
	if e.Validation != nil {
		for _, msg := range e.Validation.Errors {
			fmt.Fprintf(w, "  %s\n", firstLine(msg))
		}
	}
}

func (a *app) experimentsGet(args []string) int {
	fs := a.flagSet("experiments get", "POLICY ID")
	full := fs.Bool("full", false, "include the redacted sample requests (?view=FULL)")
	return showAnswer(a, fs, args, 2, 2, "reader", func(c *apiClient) ([]byte, error) {
		path := experimentPath(fs.Arg(0), fs.Arg(1))
		if *full {
			path += "?view=FULL"
		}
		return c.get(a.ctx, path)
	}, printExperiment)
}

// experimentsCreate posts a policy's JSON (as `GET /v1/policies/{p}`
// answers it, or a whole {"policy":…,"annotations":…} body) as a new
// experiment.
func (a *app) experimentsCreate(args []string) int {
	fs := a.flagSet("experiments create", "[--id ID] --file FILE POLICY")
	id := fs.String("id", "", "experiment `ID` (default: the server picks exp-…)")
	file := fs.String("file", "", "JSON `FILE` of the policy (- for stdin), or of a body with \"policy\"")
	var body json.RawMessage
	return a.operateVerb(fs, args, 1, func() error {
		if *file == "" {
			return errors.New("--file is required")
		}
		var err error
		body, err = a.readCreateBody(*file)
		return err
	}, func(c *apiClient) ([]byte, error) {
		path := experimentPath(fs.Arg(0), "")
		if *id != "" {
			path += "?experimentId=" + url.QueryEscape(*id)
		}
		return c.post(a.ctx, path, body)
	})
}

// readCreateBody reads --file: a body with "policy" is sent as it is, any
// other object as the body's policy.
func (a *app) readCreateBody(file string) (json.RawMessage, error) {
	var data []byte
	var err error
	if file == "-" {
		data, err = io.ReadAll(io.LimitReader(a.stdin, maxPolicyFile+1))
	} else {
		data, err = readBounded(file, maxPolicyFile)
	}
	if err != nil {
		return nil, err
	}
	if len(data) > maxPolicyFile {
		return nil, fmt.Errorf("--file is larger than %d bytes", maxPolicyFile)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("--file %s is not a JSON object: %w", file, err)
	}
	if _, ok := obj["policy"]; ok {
		return data, nil
	}
	return json.Marshal(map[string]json.RawMessage{"policy": data})
}

// operateVerb is a whole verb that starts an operation: it adds the
// connection flags (writer), --format and --wait to fs, parses n
// positional arguments, lets check refuse them (a usage error), and sends
// the request with operate.
func (a *app) operateVerb(fs *flag.FlagSet, args []string, n int, check func() error,
	send func(c *apiClient) ([]byte, error)) int {
	cf := addClientFlags(fs, "writer", defaultCallLimit)
	format := outputFlag(fs)
	wait := fs.Duration("wait", time.Minute, "how long to wait for the operation")
	if code, ok := a.parseRemote(fs, args, n, n, format); !ok {
		return code
	}
	if !a.checkWait(*wait) {
		return exitUsage
	}
	if check != nil {
		if err := check(); err != nil {
			fmt.Fprintf(a.stderr, "reconciler %s: %v\n", fs.Name(), err)
			return exitUsage
		}
	}
	return a.operate(fs.Name(), cf, *format, *wait, send)
}

// operate sends one write that answers an Operation and waits for it up
// to wait; the text output is the operation's description.
func (a *app) operate(cmd string, cf *clientFlags, format string, wait time.Duration,
	send func(c *apiClient) ([]byte, error)) int {
	var op apiv1.Operation
	code := a.remote(cmd, cf, func(c *apiClient) error {
		body, err := send(c)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &op); err != nil {
			return fmt.Errorf("the answer is not an operation: %w", err)
		}
		if !op.Done && wait > 0 {
			if body, err = a.waitOperation(c, operationID(op.Name), wait, &op); err != nil {
				return err
			}
		}
		return printAnswer(a.stdout, format, body, printOperation)
	})
	if code == exitOK && op.Error != nil {
		return exitCheck
	}
	return code
}

func (a *app) experimentsStart(args []string) int {
	return a.previewVerb("start", "startPreview", args)
}
func (a *app) experimentsStop(args []string) int { return a.previewVerb("stop", "stopPreview", args) }

// previewVerb implements start and stop: POST …:{verb} with {}.
func (a *app) previewVerb(name, verb string, args []string) int {
	fs := a.flagSet("experiments "+name, "POLICY ID")
	return a.operateVerb(fs, args, 2, nil, func(c *apiClient) ([]byte, error) {
		return c.idempotent().post(a.ctx, experimentPath(fs.Arg(0), fs.Arg(1))+":"+verb, struct{}{})
	})
}

func (a *app) experimentsDelete(args []string) int {
	fs := a.flagSet("experiments delete", "POLICY ID")
	etag := fs.String("etag", "", "delete only while the experiment has this `etag`")
	return a.operateVerb(fs, args, 2, nil, func(c *apiClient) ([]byte, error) {
		path := experimentPath(fs.Arg(0), fs.Arg(1))
		if *etag != "" {
			path += "?etag=" + url.QueryEscape(*etag)
		}
		return c.do(a.ctx, "DELETE", path, nil)
	})
}

// errNoEtag is the answer of an experiment read without an etag.
var errNoEtag = errors.New("the experiment has no etag")

// readExperiment GETs one experiment.
func (a *app) readExperiment(c *apiClient, policy, id string) (*apiv1.Experiment, error) {
	body, err := c.get(a.ctx, experimentPath(policy, id))
	if err != nil {
		return nil, err
	}
	var e apiv1.Experiment
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, fmt.Errorf("the answer is not an experiment: %w", err)
	}
	if e.Etag == "" {
		return nil, errNoEtag
	}
	return &e, nil
}
