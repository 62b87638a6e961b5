package node

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/gittest"
)

// TestSignedCommitsOnly: with [git] verify = "signed", a commit on main
// that a stolen git credential alone can make (unsigned, or signed by a
// key nobody trusts) is recorded INVALID and never served; a commit
// signed by a trusted key is promoted.
func TestSignedCommitsOnly(t *testing.T) {
	trusted, line := gittest.SigningKey(t, "alice")
	untrusted, _ := gittest.SigningKey(t, "mallory")
	signers := filepath.Join(t.TempDir(), "allowed_signers")
	if err := os.WriteFile(signers, []byte(line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	git := gittest.NewServer(t, gittest.Options{})
	url := git.InitRepo("policies", nil)
	work := git.Clone(url)
	git.SignWith(work, trusted)
	git.Commit(work, map[string]string{"web/policy.toml": webPolicy(1)}, "v1, signed")
	git.Push(work, "main")

	cfg := nodeConfig(t, "node-s", url)
	cfg.Node.Bootstrap = true
	cfg.Git.Verify = "signed"
	cfg.Git.SSHAllowedSignersFile = signers
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + startNode(t, cfg).Addr()
	eventually(t, waitTimeout, "generation 1", func() error { return serves(base, 1) })

	for i, key := range []string{"", untrusted} {
		gen := uint64(i + 2)
		git.SignWith(work, key)
		git.Commit(work, map[string]string{"web/policy.toml": webPolicy(int(gen))}, "not signed by a trusted key")
		git.Push(work, "main")
		call(t, http.MethodPost, base+"/v1/cluster:reconcile", "{}", nil)
		var g struct {
			State  string   `json:"state"`
			Errors []string `json:"errors"`
		}
		eventually(t, waitTimeout, fmt.Sprintf("generation %d recorded", gen), func() error {
			if code := call(t, http.MethodGet, fmt.Sprintf("%s/v1/generations/%d", base, gen), "", &g); code != 200 {
				return fmt.Errorf("generation %d: %d", gen, code)
			}
			return nil
		})
		if g.State != "INVALID" || len(g.Errors) == 0 || !strings.Contains(g.Errors[0], "signature not verified") {
			t.Errorf("generation %d = %+v", gen, g)
		}
		if d, _, err := evaluate(base, fmt.Sprintf("/v%d", gen), 0); err != nil || d.Decision != "DENY" || d.Generation != 1 {
			t.Errorf("the unsigned policy is served: %+v %v", d, err)
		}
	}

	git.SignWith(work, trusted)
	git.Commit(work, map[string]string{"web/policy.toml": webPolicy(4)}, "v4, signed")
	git.Push(work, "main")
	call(t, http.MethodPost, base+"/v1/cluster:reconcile", "{}", nil)
	eventually(t, waitTimeout, "generation 4", func() error { return serves(base, 4) })
	if d, _, err := evaluate(base, "/v4", 0); err != nil || d.Rule != "v4" {
		t.Errorf("v4 = %+v %v", d, err)
	}
}
