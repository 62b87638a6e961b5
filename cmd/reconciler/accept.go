package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// acceptHistory implements `reconciler accept-history [--server URL]
// [--token-env NAME] COMMIT`: the operator's explicit acceptance of a live
// branch whose head no longer descends from the active generation's commit
// (a force-push, a re-created repository). COMMIT must be the divergent
// head `reconciler status` shows; the leader then promotes it as usual
// (docs/git.md, "Never rewind").
func (a *app) acceptHistory(args []string) int {
	fs := a.flagSet("accept-history", "[--server URL] COMMIT")
	server := fs.String("server", defaultServer, "`URL` of any node's API (followers forward to the leader)")
	tokenEnv := fs.String("token-env", "RECONCILER_TOKEN", "environment `VARIABLE` holding the API token ([api] token_env), sent when set")
	if code, ok := a.parse(fs, args, 1, 1); !ok {
		return code
	}
	commit := fs.Arg(0)
	ctx, cancel := context.WithTimeout(a.ctx, time.Minute)
	defer cancel()
	base := serverBase(*server)
	if _, err := postAPI(ctx, base, "/v1/generations:acceptHistory", map[string]string{"commit": commit},
		os.Getenv(*tokenEnv), "the new history"); err != nil {
		fmt.Fprintf(a.stderr, "reconciler accept-history: %v\n", err)
		return exitCheck
	}
	fmt.Fprintf(a.stdout, "Accepted %s as the live branch's history; the leader validates and promotes it as a new generation. Follow it with `reconciler status`.\n", commit)
	return exitOK
}
