package preview

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"sync/atomic"

	"github.com/policyrollout/reconciler/internal/engine"
)

// DefaultUnchangedEvery logs 1 in this many unchanged decisions per
// experiment; every changed decision is logged.
const DefaultUnchangedEvery = 100

// LogLine is one preview log entry (CONTRACT §6): one JSON object per
// line, msg starting with the log prefix, both etags, both decisions and
// the redacted request.
type LogLine struct {
	Time               string         `json:"time"`
	Msg                string         `json:"msg"`
	Experiment         string         `json:"experiment"`
	ExperimentEtag     string         `json:"experiment_etag"`
	LiveEtag           string         `json:"live_etag"`
	Generation         uint64         `json:"generation"`
	LiveDecision       engine.Verdict `json:"live_decision"`
	ExperimentDecision engine.Verdict `json:"experiment_decision"`
	LiveRule           string         `json:"live_rule"`
	ExperimentRule     string         `json:"experiment_rule"`
	Changed            bool           `json:"changed"`
	Node               string         `json:"node,omitempty"`
	Request            map[string]any `json:"request"`
	// requestJSON, when set, is Request already encoded (by
	// Redactor.AppendJSON, once for all the lines of one request).
	requestJSON []byte
}

// Messages of preview log lines; both begin with LogPrefix, so searching
// for it finds every line and nothing else.
const (
	msgChanged   = LogPrefix + ": experiment decision differs from live"
	msgUnchanged = LogPrefix + ": experiment decision matches live (sampled)"
)

// logWriter serialises preview log lines onto one writer. Lines are
// buffered and written in batches (flush): at 10 ACTIVE experiments a
// write per line was a fifth of the shadow's CPU, taken from the live
// requests it shares the CPUs with.
type logWriter struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	failed atomic.Uint64
	// dropped counts lines not written because the disk was low
	// (ErrLowDisk); failed counts the other failures.
	dropped atomic.Uint64
}

// flushAt is the buffered size at which write flushes by itself.
const flushAt = 64 << 10

// write buffers one line; a failure is counted (Status reports it) rather
// than returned, since a full disk must not stop the evaluation.
func (l *logWriter) write(line *LogLine) {
	if l == nil || l.w == nil {
		return
	}
	l.mu.Lock()
	n := len(l.buf)
	b, err := marshalLine(l.buf, line)
	if err != nil {
		l.buf = b[:n]
		l.mu.Unlock()
		l.failed.Add(1)
		return
	}
	l.buf = append(b, '\n')
	full := len(l.buf) >= flushAt
	l.mu.Unlock()
	if full {
		l.flush()
	}
}

// flush writes the buffered lines. The workers call it whenever the queue
// is empty, so a line reaches the file within a poll interval.
func (l *logWriter) flush() {
	if l == nil || l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) == 0 {
		return
	}
	if _, err := l.w.Write(l.buf); err != nil {
		lines := uint64(bytes.Count(l.buf, []byte{'\n'}))
		if errors.Is(err, ErrLowDisk) {
			l.dropped.Add(lines)
		} else {
			l.failed.Add(lines)
		}
	}
	if cap(l.buf) > 4*flushAt {
		l.buf = nil // one burst must not pin a large buffer
	} else {
		l.buf = l.buf[:0]
	}
}

// newLogLine fills a line for one evaluation, but for the request; at is
// the time already formatted (time.RFC3339Nano, UTC).
func newLogLine(at, name string, gen uint64, live, exp engine.Decision, changed bool, node string) LogLine {
	msg := msgUnchanged
	if changed {
		msg = msgChanged
	}
	return LogLine{
		Time: at, Msg: msg, Experiment: name,
		ExperimentEtag: exp.Etag, LiveEtag: live.Etag, Generation: gen,
		LiveDecision: live.Verdict, ExperimentDecision: exp.Verdict,
		LiveRule: live.Rule, ExperimentRule: exp.Rule, Changed: changed, Node: node,
	}
}
