package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
)

// Bounds of waiting on an operation: the API answers one :wait within at
// most 60 s, so the CLI asks again until its own --wait passes.
const (
	operationWaitStep = 10 * time.Second
	maxWait           = time.Hour
	maxListPages      = 100 // 100 pages of 1000: more than the API keeps
)

// operationResult says how an operation ended, or that it runs.
func operationResult(o *apiv1.Operation) string {
	switch {
	case !o.Done:
		return "RUNNING"
	case o.Error != nil:
		return fmt.Sprintf("FAILED (%s)", grpcCodeName(o.Error.Code))
	}
	return "SUCCEEDED"
}

// grpcCodeName names the google.rpc.Code of an operation's error.
func grpcCodeName(code int) string {
	names := []string{"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
		"ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
		"OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}
	if code >= 0 && code < len(names) {
		return names[code]
	}
	return fmt.Sprint(code)
}

func operationsCommands() []subcommand {
	return []subcommand{
		{"list", "[--filter F]", "the operations the cluster keeps (24 hours, the newest 1000)", (*app).operationsList},
		{"get", "ID", "one operation", (*app).operationsGet},
		{"wait", "[--wait D] ID", "wait until the operation is done", (*app).operationsWait},
		{"cancel", "ID", "cancel a running operation (what it already did stays)", (*app).operationsCancel},
	}
}

// operations implements `reconciler operations list|get|wait|cancel`.
func (a *app) operations(args []string) int {
	return a.group("operations", "The long-running operations of experiment writes (AIP-151).", operationsCommands(), args)
}

func (a *app) operationsList(args []string) int {
	fs := a.flagSet("operations list", "[--filter F]")
	filter := fs.String("filter", "", "AIP-160 `filter`: done = true|false, metadata.target = \"…\", metadata.verb = …, joined by AND")
	return showAnswer(a, fs, args, 0, 0, "reader", func(c *apiClient) ([]byte, error) {
		return listAll(a.ctx, c, "/v1/operations", *filter, "operations")
	}, func(w io.Writer, v *apiv1.OperationList) {
		printOperations(w, v.Operations, time.Now())
	})
}

// listAll GETs every page of a list (filtered when filter is set) and
// returns them as one answer, {"<key>":[…]}.
func listAll(ctx context.Context, c *apiClient, path, filter, key string) ([]byte, error) {
	q := url.Values{"pageSize": {"1000"}}
	if filter != "" {
		q.Set("filter", filter)
	}
	all := []json.RawMessage{}
	if err := listPages(ctx, c, path, q, key, func(items []json.RawMessage) { all = append(all, items...) }); err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]any{key: all})
	return append(body, '\n'), err
}

// listPages GETs path with q, following nextPageToken, and hands each
// page's items under key to add.
func listPages(ctx context.Context, c *apiClient, path string, q url.Values, key string, add func([]json.RawMessage)) error {
	for range maxListPages {
		body, err := c.get(ctx, path+"?"+q.Encode())
		if err != nil {
			return err
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(body, &page); err != nil {
			return fmt.Errorf("the answer is not a list: %w", err)
		}
		var items []json.RawMessage
		if raw, ok := page[key]; ok {
			if err := json.Unmarshal(raw, &items); err != nil {
				return fmt.Errorf("the answer's %s is not a list: %w", key, err)
			}
		}
		add(items)
		var next string
		_ = json.Unmarshal(page["nextPageToken"], &next)
		if next == "" {
			return nil
		}
		q.Set("pageToken", next)
	}
	return fmt.Errorf("more than %d pages: narrow the list with --filter", maxListPages)
}

func printOperations(w io.Writer, ops []*apiv1.Operation, now time.Time) {
	if len(ops) == 0 {
		fmt.Fprintln(w, "No operations.")
		return
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "NAME\tVERB\tTARGET\tRESULT\tAGE\tCOMMIT")
	for _, o := range ops {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", o.Name, orDash(o.Metadata.Verb), orDash(o.Metadata.Target),
			operationResult(o), ago(o.Metadata.CreateTime, now), orDash(shortHash(o.Metadata.Commit)))
	}
	tw.Flush()
}

// printOperation describes one operation, field by field.
func printOperation(w io.Writer, o *apiv1.Operation) {
	tw := newTable(w)
	fmt.Fprintf(tw, "Name:\t%s\nVerb:\t%s\nTarget:\t%s\nResult:\t%s\n", o.Name, orDash(o.Metadata.Verb),
		orDash(o.Metadata.Target), operationResult(o))
	fmt.Fprintf(tw, "Created:\t%s\nEnded:\t%s\n", stamp(o.Metadata.CreateTime), stamp(o.Metadata.EndTime))
	if o.Metadata.Commit != "" {
		fmt.Fprintf(tw, "Commit:\t%s\n", o.Metadata.Commit)
	}
	if o.Metadata.TestsRemoved != nil {
		fmt.Fprintf(tw, "Tests removed:\t%d\n", *o.Metadata.TestsRemoved)
	}
	if o.Error != nil {
		fmt.Fprintf(tw, "Error:\t%s\n", firstLine(o.Error.Message))
	}
	tw.Flush()
}

func (a *app) operationsGet(args []string) int {
	fs := a.flagSet("operations get", "ID")
	return showAnswer(a, fs, args, 1, 1, "reader", func(c *apiClient) ([]byte, error) {
		return c.get(a.ctx, "/v1/operations/"+seg(operationID(fs.Arg(0))))
	}, printOperation)
}

func (a *app) operationsCancel(args []string) int {
	fs := a.flagSet("operations cancel", "ID")
	cf := addClientFlags(fs, "writer", defaultCallLimit)
	if code, ok := a.parse(fs, args, 1, 1); !ok {
		return code
	}
	id := operationID(fs.Arg(0))
	code := a.remote("operations cancel", cf, func(c *apiClient) error {
		_, err := c.idempotent().post(a.ctx, "/v1/operations/"+seg(id)+":cancel", struct{}{})
		return err
	})
	if code == exitOK {
		fmt.Fprintf(a.stdout, "operations/%s cancelled; what it already did stays (a pushed commit still goes live).\n", id)
	}
	return code
}

func (a *app) operationsWait(args []string) int {
	fs := a.flagSet("operations wait", "[--wait D] ID")
	cf := addClientFlags(fs, "reader", defaultCallLimit)
	format := outputFlag(fs)
	wait := fs.Duration("wait", 5*time.Minute, "how long to wait for the operation to be done")
	if code, ok := a.parseRemote(fs, args, 1, 1, format); !ok {
		return code
	}
	if !a.checkWait(*wait) {
		return exitUsage
	}
	var op apiv1.Operation
	code := a.remote("operations wait", cf, func(c *apiClient) error {
		body, err := a.waitOperation(c, operationID(fs.Arg(0)), *wait, &op)
		if err != nil {
			return err
		}
		return printAnswer(a.stdout, *format, body, printOperation)
	})
	if code == exitOK && (!op.Done || op.Error != nil) {
		return exitCheck
	}
	return code
}

// checkWait refuses a --wait outside (0, 1h].
func (a *app) checkWait(d time.Duration) bool {
	if d > 0 && d <= maxWait {
		return true
	}
	fmt.Fprintf(a.stderr, "reconciler: --wait %s must be between 0 and %s\n", d, maxWait)
	return false
}

// waitOperation asks :wait until the operation is done or wait passes,
// writing one progress line to stderr per answer that is not done yet.
// It returns the last answer, decoded into op.
func (a *app) waitOperation(c *apiClient, id string, wait time.Duration, op *apiv1.Operation) ([]byte, error) {
	ctx, cancel := context.WithTimeout(a.ctx, wait)
	defer cancel()
	start := time.Now()
	for {
		// Each :wait must end inside the client's own bound of a request.
		step := min(operationWaitStep, time.Until(start.Add(wait)), c.timeout/2)
		if step < time.Second {
			step = time.Second
		}
		body, err := c.idempotent().post(ctx, "/v1/operations/"+seg(id)+":wait", map[string]string{"timeout": fmt.Sprintf("%ds", int(step.Seconds()))})
		if err != nil {
			if ctx.Err() != nil && op.Name != "" {
				return nil, fmt.Errorf("operations/%s is not done after %s", id, wait)
			}
			return nil, err
		}
		if err := json.Unmarshal(body, op); err != nil {
			return nil, fmt.Errorf("the answer is not an operation: %w", err)
		}
		if op.Done || time.Since(start) >= wait {
			return body, nil
		}
		fmt.Fprintf(a.stderr, "%s: %s %s: %s (%s)\n", op.Name, op.Metadata.Verb, op.Metadata.Target, progress(op),
			time.Since(start).Round(time.Second))
	}
}

// progress says where a running operation is.
func progress(op *apiv1.Operation) string {
	if op.Metadata.Verb == "commit" && op.Metadata.Commit != "" {
		return "pushed " + shortHash(op.Metadata.Commit) + ", waiting for its generation to be ACTIVE on the cluster"
	}
	if op.Metadata.Verb == "commit" {
		return "building, checking and pushing the commit"
	}
	return "running"
}
