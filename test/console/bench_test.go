package console_test

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/policyrollout/reconciler/test/harness"
)

// EnvBench enables TestBenchConsole, which prints (never asserts) what the
// console costs:
//
//	RECONCILER_CONSOLE_BENCH=1 go test -count=1 -run TestBenchConsole -v -timeout 30m ./test/console/
//
// the time from navigation to the first drawn page of the overview with
// RECONCILER_CONSOLE_BENCH_EXPERIMENTS experiments (default 200) and of a
// 5,000-rule policy on a node holding 10,000 rules (the tree's cap; two
// nodes, since each experiment's create validates the whole tree); then
// decision latency with no console open, with two console tabs polling,
// and with none again.
const (
	EnvBench            = "RECONCILER_CONSOLE_BENCH"
	envBenchExperiments = "RECONCILER_CONSOLE_BENCH_EXPERIMENTS"
	benchRules          = 5_000            // per big policy (policy.MaxPolicyRules)
	benchRound          = 20 * time.Second // per latency round: ten console polls
)

// bigPolicy is a policy of n rules, each matching one path.
func bigPolicy(n int) string {
	var b strings.Builder
	b.WriteString("default_action = \"allow\"\n")
	for i := range n {
		fmt.Fprintf(&b, "\n[[rules]]\nname = \"deny-path-%05d\"\npriority = %d\naction = \"deny\"\nmatch = \"request.path == '/p/%d'\"\n", i, i+1, i)
	}
	return b.String()
}

// smallPolicy is what each experiment is made on: cheap to validate.
const smallPolicy = "default_action = \"allow\"\n\n[[rules]]\nname = \"deny-admin\"\npriority = 1\naction = \"deny\"\nmatch = \"request.path.startsWith('/admin')\"\n"

func TestBenchConsole(t *testing.T) {
	if os.Getenv(EnvBench) == "" {
		t.Skip("set " + EnvBench + "=1 to measure the console's cost")
	}
	nExp := 200
	if v, err := strconv.Atoi(os.Getenv(envBenchExperiments)); err == nil {
		nExp = v
	}
	b := newBrowser(t)

	// Experiments: each create validates the whole tree in a child
	// process, so they are made on a small tree.
	const smallPolicies = 4
	files := map[string]string{}
	for i := range smallPolicies {
		files[fmt.Sprintf("small-%d/policy.toml", i)] = smallPolicy
	}
	perPolicy := (nExp + smallPolicies - 1) / smallPolicies
	c := benchNode(t, files, fmt.Sprintf("max_experiments = %d\nmax_experiments_per_policy = %d\n", max(nExp, 1), max(perPolicy, 1)))
	start := time.Now()
	createExperiments(t, c, c.Nodes[0], nExp, smallPolicies)
	t.Logf("created %d experiments in %v", nExp, time.Since(start).Round(time.Millisecond))
	loadTimes(t, b, c.Nodes[0], "overview ("+strconv.Itoa(nExp)+" experiments)", "#/",
		`document.querySelectorAll("[data-table=experiments] tbody tr").length >= `+strconv.Itoa(max(nExp, 1)))
	loadTimes(t, b, c.Nodes[0], "experiment bench-000", "#/experiments/small-0/bench-000", `document.querySelector("[data-table=counts]")`)

	// Rules: the tree's cap is 10,000 rules, one policy at the 5,000-rule
	// cap.
	big := benchNode(t, map[string]string{"big-a/policy.toml": bigPolicy(benchRules), "big-b/policy.toml": bigPolicy(benchRules)}, "")
	loadTimes(t, b, big.Nodes[0], "policy big-a (5,000 rules)", "#/policies/big-a",
		`document.querySelectorAll("[data-table=rules] [data-rule]").length === 5000`)
	loadTimes(t, b, big.Nodes[0], "overview (10,000 rules)", "#/", `document.querySelector("[data-table=nodes] [data-node]")`)
	decisionLatency(t, big, big.Nodes[0])
}

// benchNode starts one node following a repository of files.
func benchNode(t *testing.T, files map[string]string, preview string) *harness.Cluster {
	repo := harness.NewRepo(t, harness.RepoOptions{Files: files})
	c := harness.StartCluster(t, harness.ClusterOptions{Size: 1, Repo: repo, APIToken: adminToken,
		Extra:     "[preview]\nauto_start = true\nrecord_requests = 0\n" + preview,
		Configure: func(cfg *harness.Config) { cfg.Poll = "@every 1h" }})
	c.Client = harness.NewClient(2*time.Minute, 8)
	c.Client.Token = adminToken
	return c
}

// loadTimes loads a page five times from a blank tab and prints the time
// from navigation to the page's first drawing (performance.now() when it
// drew, which the page records).
func loadTimes(t *testing.T, b *browser, n *harness.Node, name, hash, ready string) {
	b.do("open", chromedp.Navigate(n.Base()+"/ui/"))
	if _, err := eval[string](b, `sessionStorage.setItem("reconciler.console.token", `+jsString(adminToken)+`), ""`); err != nil {
		t.Fatal(err)
	}
	var ms []int
	for range 5 {
		b.do("blank", chromedp.Navigate("about:blank"))
		b.do("load "+name, chromedp.Navigate(n.Base()+"/ui/"+hash))
		b.waitJS(name, ready)
		v, err := eval[string](b, `document.getElementById("view").dataset.renderedMs`)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := strconv.Atoi(v)
		ms = append(ms, m)
	}
	slices.Sort(ms)
	t.Logf("load to first draw, %s: median %d ms, max %d ms (5 loads: %v)", name, ms[2], ms[4], ms)
}

// createExperiments makes n experiments over the small policies, 8 at a
// time, and waits until the status lists them all.
func createExperiments(t *testing.T, c *harness.Cluster, n *harness.Node, count, policies int) {
	body := `{"policy":{"default_action":"allow","rules":[{"name":"deny-admin","priority":1,"action":"deny","match":"request.path.startsWith('/adm')"}]}}`
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i := range count {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			url := fmt.Sprintf("%s/v1/policies/small-%d/experiments?experimentId=bench-%03d", n.Base(), i%policies, i)
			if code, out, err := c.Client.Do(http.MethodPost, url, body); err != nil || code != 200 {
				t.Errorf("create %d: %d %s %v", i, code, out, err)
			}
		}()
	}
	wg.Wait()
	harness.WaitFor(t, 20*time.Minute, "every experiment listed", func() error {
		st, err := c.Client.Status(n)
		if err != nil {
			return err
		}
		got := 0
		for _, row := range st.Experiments {
			if row.Experiment != nil {
				got++
			}
		}
		if got < count {
			return fmt.Errorf("%d of %d", got, count)
		}
		return nil
	})
}

// decisionLatency prints sequential :evaluate latency with no console,
// with two console tabs polling (overview and a 5,000-rule policy), and
// with none again.
func decisionLatency(t *testing.T, c *harness.Cluster, n *harness.Node) {
	req := `{"method":"GET","path":"/p/4999","host":"www.example.com","scheme":"https","source_ip":"85.214.132.117"}`
	round := func(label string) {
		var ds []time.Duration
		for end := time.Now().Add(benchRound); time.Now().Before(end); {
			s := time.Now()
			if code, out, err := c.Client.Do(http.MethodPost, n.Base()+"/v1/policies/big-a:evaluate", req); err != nil || code != 200 {
				t.Fatalf("evaluate: %d %s %v", code, out, err)
			}
			ds = append(ds, time.Since(s))
		}
		slices.Sort(ds)
		t.Logf("decisions, %s: n=%d p50=%v p90=%v p99=%v", label, len(ds), harness.Quantile(ds, 0.5).Round(time.Microsecond),
			harness.Quantile(ds, 0.9).Round(time.Microsecond), harness.Quantile(ds, 0.99).Round(time.Microsecond))
	}
	// Off, on, off, on: the machine is shared, so a difference smaller
	// than the spread between the two "off" rounds is noise.
	var tabs []*browser
	open := func() {
		for _, hash := range []string{"#/", "#/policies/big-a"} {
			tab := newBrowser(t)
			tab.do("open", chromedp.Navigate(n.Base()+"/ui/"))
			if _, err := eval[string](tab, `sessionStorage.setItem("reconciler.console.token", `+jsString(adminToken)+`), location.hash = "`+hash+`", ""`); err != nil {
				t.Fatal(err)
			}
			tab.waitJS("a drawn page", `document.getElementById("view").dataset.renderedMs`)
			tabs = append(tabs, tab)
		}
	}
	closeAll := func() {
		for _, tab := range tabs {
			tab.do("close", chromedp.Navigate("about:blank"))
		}
		tabs = nil
	}
	round("no console")
	open()
	round("two console tabs polling every 2 s (overview, 5,000-rule policy)")
	closeAll()
	round("no console again")
	open()
	round("two console tabs again")
	closeAll()
}
