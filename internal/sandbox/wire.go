package sandbox

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/policy"
)

// The pipe between parent and child carries frames: a 4-byte big-endian
// length, then that many bytes. A request is a header frame (JSON: the
// options, the policy to check, and the names of the files and list data
// that follow), then one frame of raw bytes per file and per list data, in
// the header's order; an answer is one frame of JSON. File contents travel
// as they are: base64 in JSON made a 16 MB list 21 MB, and cost the child
// a decode of all of it before validating anything.

// maxHeaderBytes bounds a request's header frame: the options, a policy
// within policy.MaxPolicyBytes as JSON, and the names of the files.
const maxHeaderBytes = 8 << 20

// header is the JSON frame that starts a request.
type header struct {
	Files    []string       // names of the file frames that follow, in order
	ListData []string       // hashes of the list data frames after them
	Policy   *policy.Policy `json:",omitempty"`
	Load     policy.LoadOptions
	Engine   engine.Options
}

var errShortFrame = errors.New("truncated frame")

// writeFrame writes one frame of the parts, concatenated.
func writeFrame(w io.Writer, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if uint64(n) > 1<<32-1 {
		return fmt.Errorf("frame of %d bytes", n)
	}
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(n))
	if _, err := w.Write(l[:]); err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			return err
		}
	}
	return nil
}

// readFrame reads one frame of at most limit bytes; io.EOF when the pipe
// ends before a frame starts.
func readFrame(r io.Reader, limit int) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errShortFrame
		}
		return nil, err
	}
	n := binary.BigEndian.Uint32(l[:])
	if uint64(n) > uint64(limit) {
		return nil, fmt.Errorf("frame of %d bytes, over the limit of %d", n, limit)
	}
	// Grown as bytes arrive, not allocated from the length: a frame that
	// says 100 MB and brings 10 bytes costs 10 bytes.
	b, err := io.ReadAll(io.LimitReader(r, int64(n)))
	if err != nil || len(b) != int(n) {
		return nil, errShortFrame
	}
	return b, nil
}

// writeRequest sends req as frames.
func writeRequest(w io.Writer, req request) error {
	h := header{Files: slices.Sorted(maps.Keys(req.Files)), ListData: slices.Sorted(maps.Keys(req.ListData)),
		Policy: req.Policy, Load: req.Load, Engine: req.Engine}
	hb, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if err := writeFrame(w, hb); err != nil {
		return err
	}
	for _, name := range h.Files {
		if err := writeFrame(w, req.Files[name]); err != nil {
			return err
		}
	}
	for _, hash := range h.ListData {
		if err := writeFrame(w, req.ListData[hash]); err != nil {
			return err
		}
	}
	return nil
}

// readRequest reads one request of at most maxRequestBytes in all; io.EOF
// when the parent closed the pipe between requests.
func readRequest(r io.Reader) (request, error) {
	hb, err := readFrame(r, maxHeaderBytes)
	if err != nil {
		return request{}, err
	}
	var h header
	if err := json.Unmarshal(hb, &h); err != nil {
		return request{}, fmt.Errorf("reading the request: %w", err)
	}
	req := request{Policy: h.Policy, Load: h.Load, Engine: h.Engine}
	left := maxRequestBytes - len(hb)
	if req.Files, left, err = readFrames(r, h.Files, left); err != nil {
		return req, err
	}
	if req.ListData, _, err = readFrames(r, h.ListData, left); err != nil {
		return req, err
	}
	return req, nil
}

// readFrames reads one frame per name, within left bytes in all.
func readFrames(r io.Reader, names []string, left int) (map[string][]byte, int, error) {
	if len(names) == 0 {
		return nil, left, nil
	}
	out := make(map[string][]byte, len(names))
	for _, name := range names {
		b, err := readFrame(r, left)
		if err != nil {
			return nil, 0, fmt.Errorf("reading %.200q: %w", name, err)
		}
		left -= len(b)
		out[name] = b
	}
	return out, left, nil
}
