package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// rollbackGitBudget is what the request may take besides the wait: the
// leader's fetch and push, each under git.timeout, and the forward hop.
const rollbackGitBudget = 2 * time.Minute

// rollbackAnswer is the answer of POST /v1/generations:rollback.
type rollbackAnswer struct {
	TargetGeneration uint64   `json:"targetGeneration"`
	TargetCommit     string   `json:"targetCommit"`
	Commit           string   `json:"commit"`
	Revision         string   `json:"revision"`
	Message          string   `json:"message"`
	Generation       uint64   `json:"generation"`
	State            string   `json:"state"`
	Errors           []string `json:"errors"`
	PullRequestURL   string   `json:"pullRequestUrl"`
}

// rollback implements `reconciler rollback [--server URL] [--to N]
// [--wait D] [--token-env NAME] [--format text|json]`: the leader writes
// "Revert to generation N (<sha>)" on the live branch, pushes it, and the
// normal path promotes it as a new generation (CONTRACT.md §2, §5).
func (a *app) rollback(args []string) int {
	fs := a.flagSet("rollback", "[--server URL] [--to GENERATION] [--wait DURATION]")
	server := fs.String("server", defaultServer, "`URL` of any node's API (followers forward to the leader)")
	to := fs.Uint64("to", 0, "`GENERATION` whose policies to restore (default: the one active before the current one)")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for the new generation to become ACTIVE (0: do not wait)")
	tokenEnv := fs.String("token-env", "RECONCILER_TOKEN", "environment `VARIABLE` holding the API token ([api] token_env), sent when set")
	format := fs.String("format", "text", "output `format`: text or json (the raw answer)")
	if code, ok := a.parse(fs, args, 0, 0); !ok {
		return code
	}
	if *format != "text" && *format != "json" || *wait < 0 || *wait > 5*time.Minute {
		fmt.Fprintln(a.stderr, "reconciler rollback: --format must be text or json, --wait between 0 and 5m")
		return exitUsage
	}
	body, err := postRollback(a.ctx, serverBase(*server), *to, *wait, os.Getenv(*tokenEnv))
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler rollback: %v\n", err)
		return exitCheck
	}
	var res rollbackAnswer
	if err := json.Unmarshal(body, &res); err != nil {
		fmt.Fprintf(a.stderr, "reconciler rollback: the answer is not a rollback: %v\n", err)
		return exitCheck
	}
	if *format == "json" {
		_, _ = a.stdout.Write(body)
	} else {
		printRollback(a.stdout, &res, *wait)
	}
	if *wait > 0 && res.State != "ACTIVE" {
		return exitCheck
	}
	return exitOK
}

// serverBase turns --server into a base URL.
func serverBase(server string) string {
	base := strings.TrimRight(server, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return base
}

// postRollback sends the request; an answer other than 200 is an error
// carrying the API's message.
func postRollback(ctx context.Context, base string, to uint64, wait time.Duration, token string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, wait+rollbackGitBudget)
	defer cancel()
	in := map[string]any{"waitSeconds": wait.Seconds()}
	if to > 0 {
		in["generation"] = to
	}
	return postAPI(ctx, base, "/v1/generations:rollback", in, token, "the rollback")
}

// postAPI POSTs in as JSON to base+path with the token when set; an
// answer other than 200 is an error carrying the API's message.
func postAPI(ctx context.Context, base, path string, in any, token, what string) ([]byte, error) {
	data, _ := json.Marshal(in)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("--server %q: %v", base, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %v (is a node running there? use --server URL)", base, unwrapURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %v", base, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Status, Message string } `json:"error"`
		}
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Status + ": " + e.Error.Message
		}
		return nil, fmt.Errorf("%s refused %s: %s", base, what, msg)
	}
	return body, nil
}

// printRollback says what was pushed and what became of it.
func printRollback(w io.Writer, r *rollbackAnswer, wait time.Duration) {
	if r.PullRequestURL != "" {
		fmt.Fprintf(w, "Pushing to the live branch was refused; opened the pull request %s: %q (%s)\n",
			r.PullRequestURL, r.Message, orDash(r.Revision))
		fmt.Fprintln(w, "Merging it promotes the revert as a new generation; follow it with `reconciler status`.")
		return
	}
	fmt.Fprintf(w, "Pushed %s: %q\n", orDash(r.Revision), r.Message)
	switch {
	case r.State == "ACTIVE":
		fmt.Fprintf(w, "Generation %d is ACTIVE: the policies of generation %d are served again.\n", r.Generation, r.TargetGeneration)
	case r.State == "INVALID":
		fmt.Fprintf(w, "Generation %d is INVALID; the active generation keeps serving:\n", r.Generation)
		for _, e := range r.Errors {
			fmt.Fprintf(w, "  %s\n", e)
		}
	case wait == 0:
		fmt.Fprintln(w, "The leader promotes it as a new generation; follow it with `reconciler status`.")
	case r.Generation != 0:
		fmt.Fprintf(w, "Generation %d is %s after %s; follow it with `reconciler status`.\n", r.Generation, r.State, wait)
	default:
		fmt.Fprintf(w, "No generation from it yet after %s; follow it with `reconciler status`.\n", wait)
	}
}
