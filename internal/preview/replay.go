package preview

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/policyrollout/reconciler/internal/engine"
)

// ReplayOptions tune ReplayFileWith.
type ReplayOptions struct {
	// Redact lists dotted request paths to redact; nil means DefaultRedact.
	Redact []string
	// Show lists the values shown (see Redactor); nil means DefaultShow.
	Show []string
	// Samples bounds the changed requests kept; 0 means DefaultSamples.
	Samples    int
	Thresholds Thresholds
	// Now fills the time of requests that have none; nil means time.Now.
	Now func() time.Time
}

// ReplayFile evaluates live and exp over recorded requests (JSONL: one
// request per line, in the request schema) and summarises the
// differences. A nil live previews a new policy (compared with a no-op
// that allows everything); a nil exp previews the deletion of live.
func ReplayFile(live, exp *engine.CompiledPolicy, r io.Reader) (Summary, error) {
	return ReplayFileWith(live, exp, r, ReplayOptions{})
}

// ReplayFileWith is ReplayFile with options.
func ReplayFileWith(live, exp *engine.CompiledPolicy, r io.Reader, opts ReplayOptions) (Summary, error) {
	live, exp, kind, err := replayPair(live, exp)
	if err != nil {
		return Summary{}, err
	}
	if opts.Redact == nil {
		opts.Redact = DefaultRedact
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	red := NewRedactor(opts.Redact, opts.Show)
	c := &cell{etag: exp.Etag(), maxSamples: cmpOr(opts.Samples, DefaultSamples)}
	err = ReadTraffic(r, func(_ int, req *engine.Request) error {
		if req.Time.IsZero() {
			req.Time = opts.Now()
		}
		c.observe(live.Evaluate(req), exp.Evaluate(req), req, req.Time, false, red, 0)
		return nil
	})
	if err != nil {
		return Summary{}, err
	}
	st := c.snapshot(time.Time{}) // no series: recorded times are not the last hour
	st.LiveEtag = live.Etag()
	s := Summary{
		Policy: "policies/" + exp.Name(), Kind: kind, ExperimentEtag: exp.Etag(), LiveEtag: live.Etag(),
		Stats: st, Thresholds: opts.Thresholds,
	}
	s.Failing, s.Reason = opts.Thresholds.Check(st)
	return s, nil
}

func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// replayPair fills a missing side with the no-op policy and checks that
// both sides are the same policy.
func replayPair(live, exp *engine.CompiledPolicy) (l, e *engine.CompiledPolicy, k Kind, err error) {
	switch {
	case live == nil && exp == nil:
		return nil, nil, "", errors.New("preview: replay needs a live policy, an experiment, or both")
	case live == nil:
		live, err = engine.Compile(NoOp(nil, exp.Name()), engine.DefaultOptions())
		return live, exp, KindNewPolicy, err
	case exp == nil:
		exp, err = engine.Compile(NoOp(live.Source(), live.Name()), engine.DefaultOptions())
		return live, exp, KindDeletion, err
	case live.Name() != exp.Name():
		return nil, nil, "", fmt.Errorf("preview: the experiment is policy %q but the live policy is %q: an experiment keeps the live policy's name",
			exp.Name(), live.Name())
	case IsNoOp(exp.Source()):
		return live, exp, KindDeletion, nil
	}
	return live, exp, KindUpdate, nil
}

// ReadTraffic decodes recorded requests, one JSON object per line, with
// engine.DecodeRequest's strict rules, and calls fn with each (and its
// 1-based line number). Blank lines are skipped; a line longer than
// engine.MaxRequestBytes or a bad request stops with an error naming the
// line; so does an error from fn.
func ReadTraffic(r io.Reader, fn func(line int, req *engine.Request) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		data, err := readLine(br, engine.MaxRequestBytes)
		if err != nil && err != io.EOF {
			return fmt.Errorf("traffic line %d: %w", line, err)
		}
		if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 {
			req, derr := engine.DecodeRequest(trimmed)
			if derr != nil {
				return fmt.Errorf("traffic line %d: %w", line, derr)
			}
			if ferr := fn(line, req); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// readLine returns the next line (with its newline) in a fresh slice,
// failing once it grows past limit bytes so memory stays bounded.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > limit+1 {
			return nil, fmt.Errorf("line is longer than %d bytes", limit)
		}
		buf = append(buf, chunk...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}
