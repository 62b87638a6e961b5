package main

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/policyrollout/reconciler/internal/api/apiv1"
)

// rollbackGitBudget is what the request may take besides the wait: the
// leader's fetch and push, each under git.timeout, and the forward hop.
const rollbackGitBudget = 2 * time.Minute

// rollback implements `reconciler rollback [--server URL] [--to N]
// [--wait D] [--token-env NAME] [--format text|json]`: the leader writes
// "Revert to generation N (<sha>)" on the live branch, pushes it, and the
// normal path promotes it as a new generation (docs/api.md, Rollback).
func (a *app) rollback(args []string) int {
	fs := a.flagSet("rollback", "[--server URL] [--to GENERATION] [--wait DURATION]")
	cf := addClientFlags(fs, "admin", 30*time.Second+rollbackGitBudget) // default: --wait plus the git budget
	to := fs.Uint64("to", 0, "`GENERATION` whose policies to restore (default: the one active before the current one)")
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for the new generation to become ACTIVE (0: do not wait)")
	format := outputFlag(fs)
	if code, ok := a.parseRemote(fs, args, 0, 0, format); !ok {
		return code
	}
	if *wait < 0 || *wait > 5*time.Minute {
		fmt.Fprintf(a.stderr, "reconciler rollback: --wait %s must be between 0 and 5m\n", *wait)
		return exitUsage
	}
	if !setFlags(fs)["timeout"] {
		cf.timeout = *wait + rollbackGitBudget
	}
	var res apiv1.Rollback
	code := a.remote("rollback", cf, func(c *apiClient) error {
		in := map[string]any{"waitSeconds": wait.Seconds()}
		if *to > 0 {
			in["generation"] = *to
		}
		body, err := c.post(a.ctx, "/v1/generations:rollback", in)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &res); err != nil {
			return fmt.Errorf("the answer is not a rollback: %w", err)
		}
		if *format == "json" {
			_, err = a.stdout.Write(body)
			return err
		}
		printRollback(a.stdout, &res, *wait)
		return nil
	})
	if code == exitOK && *wait > 0 && res.State != "ACTIVE" {
		return exitCheck
	}
	return code
}

// printRollback says what was pushed and what became of it.
func printRollback(w io.Writer, r *apiv1.Rollback, wait time.Duration) {
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
