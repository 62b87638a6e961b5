package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

// hostileAuthor is the author line of a pushed commit. The git CLI strips
// angle brackets from names, so the commit is written raw, as any pusher
// can; go-git reads the name up to the last '<'.
const hostileAuthor = hostileRule + " <m@x>"

type historyEntry struct {
	Generation  uint64 `json:"generation"`
	Commit      string `json:"commit"`
	Author      string `json:"author"`
	RollbackOf  uint64 `json:"rollbackOf"`
	RequestedBy string `json:"requestedBy"`
}

// pushHostileAuthor pushes a policy change to main whose commit's author
// is hostileAuthor, and returns the commit.
func pushHostileAuthor(t *testing.T, repo *harness.Repo) string {
	g := repo.Git
	admin := harness.ExampleFiles(t)["admin-api/policy.toml"]
	g.Commit(repo.Work, map[string]string{"admin-api/policy.toml": strings.Replace(admin, "Internal admin API", "Internal admin API (by a hostile author)", 1)}, "hostile author")
	raw := g.Git(repo.Work, "cat-file", "commit", "HEAD")
	forged := strings.Replace(raw, "\nauthor Test User <test@example.com>", "\nauthor "+hostileAuthor, 1)
	if forged == raw {
		t.Fatalf("no author line to forge in:\n%s", raw)
	}
	path := filepath.Join(t.TempDir(), "commit")
	if err := os.WriteFile(path, []byte(forged+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := g.Git(repo.Work, "hash-object", "-w", "--literally", "-t", "commit", path)
	g.Git(repo.Work, "reset", "-q", "--soft", h)
	g.Push(repo.Work, "main")
	return h
}

// historyShowsAuthorAndRollback: a commit with a hostile author becomes a
// generation whose author the history shows as text; a rollback through
// the API then appears in the open history with who asked, as the API
// records it (the credential's name and role, never its secret).
func historyShowsAuthorAndRollback(t *testing.T, b *browser, c *harness.Cluster) {
	commit := pushHostileAuthor(t, c.Repo)
	base := c.Nodes[0].Base()
	var forged historyEntry
	harness.WaitFor(t, harness.PromoteTimeout, "the hostile author's generation", func() error {
		var list struct{ Generations []historyEntry }
		c.Client.Fetch(t, http.MethodGet, base+"/v1/generations", "", &list)
		for _, g := range list.Generations {
			if g.Commit == commit {
				forged = g
				return nil
			}
		}
		return fmt.Errorf("no generation of %s yet", commit)
	})
	if forged.Author != hostileAuthor {
		t.Errorf("API author = %q, want %q", forged.Author, hostileAuthor)
	}
	code, body, err := c.Client.Do(http.MethodPost, base+"/v1/generations:rollback", `{"waitSeconds":120}`)
	if err != nil || code != 200 {
		t.Fatalf("rollback: %d %s %v", code, body, err)
	}
	var res struct{ Generation uint64 }
	if err := json.Unmarshal(body, &res); err != nil || res.Generation == 0 {
		t.Fatalf("rollback answer %s: %v", body, err)
	}
	var back historyEntry
	c.Client.Fetch(t, http.MethodGet, base+"/v1/generations/"+strconv.FormatUint(res.Generation, 10), "", &back)
	if back.RollbackOf == 0 || back.RollbackOf >= forged.Generation || !strings.HasSuffix(back.RequestedBy, " (admin)") ||
		strings.Contains(back.RequestedBy, adminToken) {
		t.Fatalf("rollback's generation = %+v", back)
	}
	line := fmt.Sprintf("rollback to generation %d, asked by %s", back.RollbackOf, back.RequestedBy)
	row := `[...document.querySelectorAll("[data-table=generations] tr")].find(tr => tr.querySelector("[data-count=generation]")?.textContent === "%d")`
	b.waitJS("the rollback in the history", fmt.Sprintf(`window.noReload === true && (%s)?.querySelector("[data-notes]").textContent === %s`,
		fmt.Sprintf(row, back.Generation), jsString(line)))
	author, err := eval[string](b, fmt.Sprintf(`(%s).querySelector("[data-author]").textContent`, fmt.Sprintf(row, forged.Generation)))
	if err != nil || author != hostileAuthor {
		t.Errorf("author shown as %q (%v), want %q", author, err, hostileAuthor)
	}
	if n, _ := eval[int](b, `document.querySelectorAll("img").length`); n != 0 {
		t.Errorf("the history has %d img elements", n)
	}
	b.screenshot("generations-rollback")
}
