// Command benchref serves the reference handlers `make bench` measures
// the decision endpoint against (scripts/bench-http.sh):
//
//	benchref -addr 127.0.0.1:18182 -mode trivial   # decodes the request JSON with encoding/json
//	benchref -addr 127.0.0.1:18183 -mode nodecode  # reads the body, decodes nothing
//	benchref -addr 127.0.0.1:18184 -mode fastdecode # reads the body, decodes it with the node's decoder
//	benchref -gen-list 1000000 >big.netset          # N random mixed IPv4/IPv6 CIDRs, one a line
//
// -node-timeouts gives the server the read, write and idle timeouts of
// `reconciler serve` (internal/node): with them net/http sets two more
// deadlines a request, which the node pays and a bare server does not.
//
// "trivial" is the simplest Go JSON service: it decodes the same request
// object the node decodes into a struct (engine.Request, whose JSON tags are
// the request schema) with encoding/json and encodes a
// decision-shaped answer with it. "nodecode" reads the body and writes a
// fixed answer of the same shape: the floor of net/http on this machine.
// "fastdecode" is nodecode plus the node's own request decoder
// (engine.DecodeRequestWithin, the fast path :evaluate runs) and nothing
// else: how close to the floor a server can be that only reads what the
// node reads, before it decides, counts, offers to preview and answers.
// All answer any path and method, so the same wrk script drives every
// server. It listens on loopback only: it is a measuring stick, not a
// service.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/policyrollout/reconciler/internal/api"
	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/listgen"
)

// answer has the shape of the node's decision answer.
type answer struct {
	Decision   string `json:"decision"`
	Rule       string `json:"rule"`
	Policy     string `json:"policy"`
	Etag       string `json:"etag"`
	Generation uint64 `json:"generation"`
}

const fixedAnswer = `{"decision":"ALLOW","rule":"allow-browsing","policy":"edge-firewall","etag":"0123456789abcdef","generation":1}` + "\n"

func trivial(w http.ResponseWriter, r *http.Request) {
	var req engine.Request // a plain struct with JSON tags: encoding/json decodes it, not the engine
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	verdict := "ALLOW"
	if req.Method == "" {
		verdict = "DENY"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer{Decision: verdict, Rule: "allow-browsing", Policy: "edge-firewall",
		Etag: "0123456789abcdef", Generation: 1})
}

func nodecode(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20)); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, fixedAnswer)
}

// bodies are fastdecode's read buffers, as the node pools its own.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func fastdecode(w http.ResponseWriter, r *http.Request) {
	buf := bodies.Get().(*bytes.Buffer)
	defer func() { buf.Reset(); bodies.Put(buf) }()
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, 1<<20)); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if _, err := engine.DecodeRequestWithin(buf.Bytes(), engine.Limits{}); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, fixedAnswer)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18182", "loopback address to listen on")
	mode := flag.String("mode", "trivial", `"trivial" (decode with encoding/json), "nodecode" (read the body only) or "fastdecode" (decode with the node's decoder)`)
	genList := flag.Int("gen-list", 0, "write this many random mixed IPv4/IPv6 CIDRs to stdout and exit")
	nodeTimeouts := flag.Bool("node-timeouts", false, "serve with the read, write and idle timeouts of reconciler serve")
	flag.Parse()
	if *genList > 0 {
		if err := writeList(os.Stdout, *genList); err != nil {
			fmt.Fprintf(os.Stderr, "benchref: %v\n", err)
			os.Exit(1)
		}
		return
	}
	var h http.HandlerFunc
	switch *mode {
	case "trivial":
		h = trivial
	case "nodecode":
		h = nodecode
	case "fastdecode":
		h = fastdecode
	default:
		fmt.Fprintf(os.Stderr, "benchref: unknown -mode %q (trivial, nodecode or fastdecode)\n", *mode)
		os.Exit(2)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || !net.ParseIP(host).IsLoopback() {
		fmt.Fprintf(os.Stderr, "benchref: -addr %q must be a loopback address\n", *addr)
		os.Exit(2)
	}
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if *nodeTimeouts { // as internal/node's startHTTP
		srv.ReadTimeout = 30 * time.Second
		srv.WriteTimeout = api.MaxHandlerTime + time.Minute
		srv.IdleTimeout = 2 * time.Minute
	}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintf(os.Stderr, "benchref: %v\n", err)
		os.Exit(1)
	}
}

// writeList writes n random CIDRs, half IPv4 (/16-/32) and half IPv6
// (/32-/64), as a large abuse feed is. The seed is fixed, so every run
// measures the same list, and the CIDRs lie in address blocks that neither
// policies.example's tests nor its sample traffic use (IPv4 40-44, 50-61
// and 65-70.x.x.x, IPv6 2a10::/12 and up), so a policy's answers do not
// change when the list is added to it: the generation stays valid and the
// side by side compares the same decisions.
func writeList(w io.Writer, n int) error {
	v4 := slices.Concat(listgen.Range(40, 44), listgen.Range(50, 61), listgen.Range(65, 70))
	return listgen.Mixed{Seed: 1, V4First: v4, V6Second: listgen.Range(0x10, 0xff)}.Write(w, n)
}
