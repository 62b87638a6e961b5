// Package console_test drives the web console (/ui/) in a real headless
// Chromium against a real 3-node cluster with tokens: the login a reader
// without a token gets, the overview, a push that the overview and the
// history show without a reload, a commit with a hostile author and a
// rollback that the history shows with who asked, a policy, and an experiment whose counts
// match the API's while its hostile names (a rule named like an <img>
// payload, a branch with quotes and angle brackets) stay text. Each
// page's screenshot is written to $RECONCILER_ARTIFACTS/console (or a
// temp dir named in the log).
//
//	go test -count=1 -v ./test/console/
package console_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/policyrollout/reconciler/test/harness"
)

func TestMain(m *testing.M) { harness.Main(m) }

const (
	adminToken  = "console-admin-token-0123456789"
	readerToken = "console-reader-token-0123456789"
	readerEnv   = "CONSOLE_READER_TOKEN"
	// hostileRule would show an image and run its handler if the page
	// put names into markup; pwnRule would set window.pwned.
	hostileRule = `<img src=x onerror=alert(1)>`
	pwnRule     = `<img src=x onerror=window.pwned=1>`
	// hostileBranch is a legal git branch name with quotes and angle
	// brackets.
	hostileBranch = `q"<b>'x`
)

// hostilePolicy adds two rules with hostile names in front of the
// embargo rule of edge-firewall: they deny BR and IN, which the sample
// traffic has, so they also appear in the experiment's transitions.
func hostilePolicy(live string) string {
	return live + `
[[rules]]
name = '` + hostileRule + `'
priority = 1098
action = "deny"
match = "'cf-ipcountry' in request.headers && request.headers['cf-ipcountry'] == 'BR'"

[[rules]]
name = '` + pwnRule + `'
priority = 1099
action = "deny"
match = "'cf-ipcountry' in request.headers && request.headers['cf-ipcountry'] == 'IN'"
`
}

func startCluster(t *testing.T, repo *harness.Repo) *harness.Cluster {
	return harness.StartCluster(t, harness.ClusterOptions{
		Size: 3, Repo: repo, APIToken: adminToken,
		Env:   []string{readerEnv + "=" + readerToken},
		Extra: "[preview]\nauto_start = true\nrecord_requests = 0\n",
		Configure: func(cfg *harness.Config) {
			cfg.APIExtra = "\n[[api.tokens]]\nname = \"console\"\nrole = \"reader\"\nenv = \"" + readerEnv + "\"\n"
		},
	})
}

// experimentOf finds the experiment the branch made, by its source.
func experimentOf(t *testing.T, c *harness.Cluster, n *harness.Node, branch string) (policy, id string) {
	t.Helper()
	harness.WaitFor(t, 60*time.Second, "the branch's experiment", func() error {
		st, err := c.Client.Status(n)
		if err != nil {
			return err
		}
		for _, row := range st.Experiments {
			if x := row.Experiment; x != nil && x.Source.Branch == branch && x.State == "ACTIVE" {
				parts := strings.Split(x.Name, "/")
				policy, id = parts[1], parts[3]
				return nil
			}
		}
		return fmt.Errorf("no ACTIVE experiment from %q in %d entries", branch, len(st.Experiments))
	})
	return policy, id
}

func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	files := harness.ExampleFiles(t)
	repo := harness.NewRepo(t, harness.RepoOptions{Files: files})
	c := startCluster(t, repo)
	n1 := c.Nodes[0]

	repo.Git.CreateBranch(repo.Work, hostileBranch)
	repo.Git.Commit(repo.Work, map[string]string{"edge-firewall/policy.toml": hostilePolicy(files["edge-firewall/policy.toml"])}, "hostile names")
	repo.Git.Push(repo.Work, hostileBranch)
	repo.Git.Checkout(repo.Work, "main")
	policy, id := experimentOf(t, c, n1, hostileBranch)
	expURL := n1.Base() + "/v1/policies/" + policy + "/experiments/" + id
	harness.WaitFor(t, 60*time.Second, "every node previewing", func() error {
		var x harness.Experiment
		if code := c.Client.Fetch(t, http.MethodGet, expURL, "", &x); code != 200 || x.Stats == nil || len(x.Stats.Nodes) != 3 {
			return fmt.Errorf("HTTP %d %+v", code, x.Stats)
		}
		return nil
	})
	lines := harness.ExampleTraffic(t)
	for _, n := range c.Nodes {
		for _, l := range lines {
			if code, body, err := c.Client.Do(http.MethodPost, n.Base()+"/v1/policies/edge-firewall:evaluate", l); err != nil || code != 200 {
				t.Fatalf("evaluate on %s: %d %s %v", n.ID, code, body, err)
			}
		}
	}
	var exp harness.Experiment
	harness.WaitFor(t, 60*time.Second, "the merged stats", func() error {
		c.Client.Fetch(t, http.MethodGet, expURL, "", &exp)
		if exp.Stats == nil || exp.Stats.Evaluated != uint64(3*len(lines)) || exp.Stats.AllowToDeny == 0 ||
			exp.Stats.Series == nil || sum(exp.Stats.Series.Evaluated) != exp.Stats.Evaluated {
			return fmt.Errorf("stats %+v", exp.Stats)
		}
		return nil
	})
	statusAnswers304(t, c, n1)

	b := newBrowser(t)
	loginRefusesWithoutToken(t, b, n1)
	gen := overviewShowsCluster(t, b, c)
	pushUpdatesWithoutReload(t, b, c, gen)
	historyShowsAuthorAndRollback(t, b, c)
	policyShowsRules(t, b, c, n1)
	experimentMatchesAPI(t, b, c, expURL, policy, id)
	if d := b.dialogsOpened(); len(d) != 0 {
		t.Errorf("the page opened dialogs: %q", d)
	}
}

// loginRefusesWithoutToken: the page loads without a token, the API
// refuses its data calls (401), and the page shows the token form and no
// data; the API itself refuses the same call.
func loginRefusesWithoutToken(t *testing.T, b *browser, n *harness.Node) {
	b.do("open the console", chromedp.Navigate(n.Base()+"/ui/"))
	b.waitJS("the token form", `!document.getElementById("login").hidden`)
	if tables, _ := eval[int](b, `document.querySelectorAll("#view table").length`); tables != 0 {
		t.Errorf("the page shows %d tables without a token", tables)
	}
	if r := b.text("#login-reason"); !strings.Contains(r, "reader role") {
		t.Errorf("login reason %q does not name the reader role", r)
	}
	anon := harness.NewClient(10*time.Second, 1)
	if code, body, _ := anon.Get(n.Base() + "/v1/status"); code != 401 {
		t.Errorf("GET /v1/status without a token: %d %s", code, body)
	}
	b.screenshot("login")
	b.do("type the reader token", chromedp.SendKeys(chromedp.CSS("#token"), readerToken),
		chromedp.Click(chromedp.CSS("#login-form button")))
}

// overviewShowsCluster: three nodes and the active generation the API
// reports; it returns that generation.
func overviewShowsCluster(t *testing.T, b *browser, c *harness.Cluster) uint64 {
	b.waitJS("three nodes", `document.querySelectorAll("[data-table=nodes] [data-node]").length === 3`)
	for _, n := range c.Nodes {
		if ok, _ := eval[bool](b, "!!document.querySelector("+jsString(`[data-node="`+n.ID+`"]`)+")"); !ok {
			t.Errorf("node %s is not on the overview", n.ID)
		}
	}
	st, err := c.Client.Status(c.Nodes[0])
	if err != nil {
		t.Fatal(err)
	}
	b.waitJS("the active generation", `document.querySelector("[data-fact=active-generation]").textContent === "`+strconv.FormatUint(st.ActiveGeneration, 10)+`"`)
	keepsFocus(t, b)
	b.screenshot("overview")
	return st.ActiveGeneration
}

// keepsFocus: a link focused from the keyboard keeps the focus across
// polls (the status changes with every heartbeat; the page must not
// redraw under the user for that).
func keepsFocus(t *testing.T, b *browser) {
	sel := `[data-table=policies] a[href="#/policies/edge-firewall"]`
	if _, err := eval[bool](b, "(document.querySelector("+jsString(sel)+").focus(), true)"); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // "updated hh:mm:ss" changes with each poll
		last := b.text("#live")
		b.waitJS(fmt.Sprintf("poll %d", i+1), `document.getElementById("live").textContent !== `+jsString(last))
	}
	if ok, _ := eval[bool](b, "document.activeElement === document.querySelector("+jsString(sel)+")"); !ok {
		t.Error("the focused link lost the focus across polls")
	}
}

// pushUpdatesWithoutReload: a push to main becomes a new active
// generation that the open overview and then the history show, while a
// marker set in the page before the push survives (no reload).
func pushUpdatesWithoutReload(t *testing.T, b *browser, c *harness.Cluster, gen uint64) {
	if _, err := eval[bool](b, `window.noReload = true`); err != nil {
		t.Fatal(err)
	}
	admin := harness.ExampleFiles(t)["admin-api/policy.toml"]
	c.Repo.Push(map[string]string{"admin-api/policy.toml": strings.Replace(admin, "Internal admin API", "Internal admin API (reviewed)", 1)}, "reword admin-api")
	var next uint64
	harness.WaitFor(t, harness.PromoteTimeout, "the push active", func() error {
		st, err := c.Client.Status(c.Nodes[0])
		if err != nil || st.ActiveGeneration <= gen {
			return fmt.Errorf("active %d, %v", st.ActiveGeneration, err)
		}
		next = st.ActiveGeneration
		return nil
	})
	g := strconv.FormatUint(next, 10)
	b.waitJS("the overview at generation "+g, `window.noReload === true && document.querySelector("[data-fact=active-generation]").textContent === "`+g+`"`)
	if _, err := eval[string](b, `location.hash = "#/generations"`); err != nil {
		t.Fatal(err)
	}
	b.waitJS("generation "+g+" in the history", `window.noReload === true && [...document.querySelectorAll("[data-table=generations] [data-count=generation]")].some(td => td.textContent === "`+g+`")`)
	b.screenshot("generations")
}

// policyShowsRules: the policy page lists as many rules as the API.
func policyShowsRules(t *testing.T, b *browser, c *harness.Cluster, n *harness.Node) {
	var p struct {
		Rules []struct{ Name string } `json:"rules"`
	}
	c.Client.Fetch(t, http.MethodGet, n.Base()+"/v1/policies/edge-firewall", "", &p)
	if _, err := eval[string](b, `location.hash = "#/policies/edge-firewall"`); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the rules of edge-firewall", `document.querySelectorAll("[data-table=rules] [data-rule]").length === `+strconv.Itoa(len(p.Rules)))
	first := b.text("[data-table=rules] [data-rule]")
	if len(p.Rules) == 0 || first != p.Rules[0].Name {
		t.Errorf("first rule on the page %q, API %v", first, p.Rules)
	}
	b.screenshot("policy")
}

// experimentMatchesAPI: the counts on the experiment's page are the
// API's, the hostile names are there as text, and nothing they carry ran.
func experimentMatchesAPI(t *testing.T, b *browser, c *harness.Cluster, expURL, policy, id string) {
	if _, err := eval[string](b, `location.hash = "#/experiments/`+policy+`/`+id+`"`); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the chart", `document.querySelector("#view .chart canvas")`)
	var exp harness.Experiment
	c.Client.Fetch(t, http.MethodGet, expURL, "", &exp)
	chartShowsSeries(t, b, exp)
	want := map[string]uint64{"evaluated": exp.Stats.Evaluated, "unchanged": exp.Stats.Unchanged, "allowToDeny": exp.Stats.AllowToDeny,
		"denyToAllow": exp.Stats.DenyToAllow, "ruleChanged": exp.Stats.RuleChanged, "errors": exp.Stats.Errors, "dropped": exp.Stats.Dropped}
	for k, v := range want {
		if got := b.text("[data-table=counts] td[data-count=" + k + "]"); got != strconv.FormatUint(v, 10) {
			t.Errorf("page shows %s = %q, API %d", k, got, v)
		}
	}
	names, err := eval[[]string](b, `[...document.querySelectorAll("#view [data-rule]")].map(e => e.textContent)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{hostileRule, pwnRule} {
		if !contains(names, want) {
			t.Errorf("rule %q is not shown as text; names: %q", want, names)
		}
	}
	if got := b.text("[data-branch]"); got != hostileBranch {
		t.Errorf("branch shown as %q, want %q", got, hostileBranch)
	}
	if n, _ := eval[int](b, `document.querySelectorAll("img").length`); n != 0 {
		t.Errorf("the page has %d img elements", n)
	}
	if pwned, _ := eval[bool](b, `window.pwned !== undefined`); pwned {
		t.Error("a payload ran: window.pwned is set")
	}
	b.screenshot("experiment")
	if _, err := eval[bool](b, `(document.querySelector("#view .chart").scrollIntoView(), true)`); err != nil {
		t.Fatal(err)
	}
	b.screenshot("experiment-chart") // the last hour, as the nodes counted it
	if _, err := eval[bool](b, `(document.querySelector("#view h2:nth-of-type(3)").scrollIntoView(), true)`); err != nil {
		t.Fatal(err)
	}
	b.screenshot("experiment-names") // the transitions, where the hostile rule names stand
}

// chartShowsSeries: on its first load the page charts the nodes' last
// hour, merged (not what it polled itself): the minutes under the chart
// add up to the API's counts of all three nodes and start where the
// API's series starts.
func chartShowsSeries(t *testing.T, b *browser, exp harness.Experiment) {
	t.Helper()
	column := func(key string) []uint64 {
		vals, err := eval[[]uint64](b, `[...document.querySelectorAll("[data-table=minutes] td[data-count=`+key+`]")].map(e => Number(e.textContent))`)
		if err != nil {
			t.Fatal(err)
		}
		return vals
	}
	evaluated, a2d := column("minute-evaluated"), column("minute-allowToDeny")
	if len(evaluated) == 0 || sum(evaluated) != exp.Stats.Evaluated || sum(a2d) != exp.Stats.AllowToDeny {
		t.Errorf("the chart's minutes: evaluated %v (sum %d), allow→deny sum %d; the API: %d evaluated, %d allow→deny",
			evaluated, sum(evaluated), sum(a2d), exp.Stats.Evaluated, exp.Stats.AllowToDeny)
	}
	first := b.text("[data-table=minutes] tbody tr td")
	if want := exp.Stats.Series.Start.UTC().Format("2006-01-02 15:04:05Z"); first != want {
		t.Errorf("the chart starts at %q, the API's series at %q", first, want)
	}
	if n, _ := eval[int](b, `Number(document.querySelector("#view .chart").dataset.minutes)`); n != len(evaluated) {
		t.Errorf("the chart has %d minutes, its table %d", n, len(evaluated))
	}
}

func sum(xs []uint64) (n uint64) {
	for _, x := range xs {
		n += x
	}
	return n
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
