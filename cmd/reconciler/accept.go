package main

import (
	"fmt"

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
	cf := addClientFlags(fs, "admin", time.Minute)
	if code, ok := a.parse(fs, args, 1, 1); !ok {
		return code
	}
	commit := fs.Arg(0)
	code := a.remote("accept-history", cf, func(c *apiClient) error {
		_, err := c.post(a.ctx, "/v1/generations:acceptHistory", map[string]string{"commit": commit})
		return err
	})
	if code == exitOK {
		fmt.Fprintf(a.stdout, "Accepted %s as the live branch's history; the leader validates and promotes it as a new generation. Follow it with `reconciler status`.\n", commit)
	}
	return code
}
