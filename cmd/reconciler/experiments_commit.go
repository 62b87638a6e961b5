package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
)

// experimentsCommit implements `reconciler experiments commit [--wait]
// POLICY ID`: the experiment's policy goes to the live branch, and with
// --wait the command follows the operation, one progress line per step on
// stderr, until the generation it made is ACTIVE.
func (a *app) experimentsCommit(args []string) int {
	fs := a.flagSet("experiments commit", "[--wait] [--etag E] POLICY ID")
	cf := addClientFlags(fs, "writer", defaultCallLimit)
	format := outputFlag(fs)
	etag := fs.String("etag", "", "commit only while the experiment has this `etag` (default: its current one)")
	parent := fs.String("parent-etag", "", "commit only while the live policy has this `etag`")
	wait := fs.Bool("wait", false, "wait until the new generation is ACTIVE, printing progress on stderr")
	waitFor := fs.Duration("wait-timeout", 10*time.Minute, "how long --wait waits")
	if code, ok := a.parseRemote(fs, args, 2, 2, format); !ok {
		return code
	}
	if !a.checkWait(*waitFor) {
		return exitUsage
	}
	policy, id := fs.Arg(0), fs.Arg(1)
	var op apiv1.Operation
	code := a.remote(fs.Name(), cf, func(c *apiClient) error {
		if *etag == "" {
			e, err := a.readExperiment(c, policy, id)
			if err != nil {
				return err
			}
			*etag = e.Etag
		}
		body, err := c.post(a.ctx, experimentPath(policy, id)+":commit", map[string]string{"etag": *etag, "parentEtag": *parent})
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &op); err != nil {
			return fmt.Errorf("the answer is not an operation: %w", err)
		}
		if *wait && !op.Done {
			fmt.Fprintf(a.stderr, "%s: commit %s: %s\n", op.Name, op.Metadata.Target, progress(&op))
			if body, err = a.waitOperation(c, operationID(op.Name), *waitFor, &op); err != nil {
				return err
			}
		}
		if err := printAnswer(a.stdout, *format, body, printOperation); err != nil || *format == "json" || !op.Done || op.Error != nil {
			return err
		}
		return a.printActive(c)
	})
	if code == exitOK && (op.Error != nil || *wait && !op.Done) {
		return exitCheck
	}
	return code
}

// printActive ends a commit's text with the generation now active.
func (a *app) printActive(c *apiClient) error {
	body, err := c.get(a.ctx, "/v1/status")
	if err != nil {
		return err
	}
	var v apiv1.Status
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("the status is not a status: %w", err)
	}
	fmt.Fprintf(a.stdout, "Generation %s is ACTIVE.\n", generationLabel(v.ActiveGeneration, v.Commit))
	return nil
}

// experimentsDiff implements `reconciler experiments diff POLICY ID`: the
// experiment's policy against the live one, key by key and rule by rule.
func (a *app) experimentsDiff(args []string) int {
	fs := a.flagSet("experiments diff", "POLICY ID")
	cf := addClientFlags(fs, "reader", defaultCallLimit)
	if code, ok := a.parse(fs, args, 2, 2); !ok {
		return code
	}
	policy, id := fs.Arg(0), fs.Arg(1)
	return a.remote(fs.Name(), cf, func(c *apiClient) error {
		e, err := a.readExperiment(c, policy, id)
		if err != nil {
			return err
		}
		live, err := c.get(a.ctx, "/v1/policies/"+seg(policy))
		var ae *apiError
		if errors.As(err, &ae) && ae.Code == 404 {
			live, err = []byte("{}"), nil // a new policy: everything is added
		}
		if err != nil {
			return err
		}
		next, err := json.Marshal(e.Policy)
		if err != nil {
			return fmt.Errorf("the experiment's policy: %w", err)
		}
		return writeDiff(a.stdout, "policies/"+policy, e.Name, live, next)
	})
}

// outputOnly are the keys of a policy resource that no experiment sets.
var outputOnly = map[string]bool{"name": true, "etag": true, "generation": true, "commit": true, "lists": true}

// writeDiff prints what next changes in live: "~ key: old -> new",
// "+ rule NAME", "- rule NAME" and "~ rule NAME" with the changed fields.
func writeDiff(w io.Writer, liveName, expName string, live, next []byte) error {
	var l, n map[string]json.RawMessage
	if err := json.Unmarshal(live, &l); err != nil {
		return fmt.Errorf("the live policy is not JSON: %w", err)
	}
	if err := json.Unmarshal(next, &n); err != nil {
		return fmt.Errorf("the experiment's policy is not JSON: %w", err)
	}
	fmt.Fprintf(w, "--- %s (live)\n+++ %s\n", liveName, expName)
	changes := 0
	for _, k := range sortedKeys(union(l, n)) {
		if outputOnly[k] || k == "rules" || k == "tests" {
			continue
		}
		if !jsonEqual(l[k], n[k]) {
			fmt.Fprintf(w, "~ %s: %s -> %s\n", k, orNone(l[k]), orNone(n[k]))
			changes++
		}
	}
	changes += diffNamed(w, "rule", l["rules"], n["rules"])
	changes += diffNamed(w, "test", l["tests"], n["tests"])
	if changes == 0 {
		fmt.Fprintln(w, "no changes")
	}
	return nil
}

// diffNamed compares two lists of objects with a "name" by name.
func diffNamed(w io.Writer, what string, live, next json.RawMessage) int {
	l, n := byName(live), byName(next)
	changes := 0
	for _, name := range sortedKeys(union(l, n)) {
		old, had := l[name]
		cur, has := n[name]
		switch {
		case !had:
			fmt.Fprintf(w, "+ %s %s\n", what, name)
		case !has:
			fmt.Fprintf(w, "- %s %s\n", what, name)
		default:
			var o, c map[string]json.RawMessage
			_ = json.Unmarshal(old, &o)
			_ = json.Unmarshal(cur, &c)
			fields := changedKeys(o, c)
			if len(fields) == 0 {
				continue
			}
			fmt.Fprintf(w, "~ %s %s\n", what, name)
			for _, k := range fields {
				fmt.Fprintf(w, "    %s: %s -> %s\n", k, orNone(o[k]), orNone(c[k]))
			}
		}
		changes++
	}
	return changes
}

// byName indexes a JSON list of objects by their "name".
func byName(list json.RawMessage) map[string]json.RawMessage {
	var items []json.RawMessage
	_ = json.Unmarshal(list, &items)
	out := map[string]json.RawMessage{}
	for i, it := range items {
		var named struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(it, &named)
		if named.Name == "" {
			named.Name = fmt.Sprintf("#%d", i+1)
		}
		out[named.Name] = it
	}
	return out
}

func changedKeys(a, b map[string]json.RawMessage) []string {
	var out []string
	for k := range union(a, b) {
		if !jsonEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func union(a, b map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// jsonEqual compares two JSON values by meaning; absent equals null and
// the zero values the API leaves out ("", 0, false, []).
func jsonEqual(a, b json.RawMessage) bool {
	return bytes.Equal(canonical(a), canonical(b))
}

func canonical(raw json.RawMessage) []byte {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	switch x := v.(type) {
	case nil, bool, string, float64:
		if x == nil || x == false || x == "" || x == 0.0 {
			return nil
		}
	case []any:
		if len(x) == 0 {
			return nil
		}
	}
	out, _ := json.Marshal(v) // maps marshal with sorted keys
	return out
}

func orNone(raw json.RawMessage) string {
	if c := canonical(raw); c != nil {
		return string(c)
	}
	return "(none)"
}
