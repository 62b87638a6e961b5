package preview_test

import (
	"strconv"
	"testing"
	"unsafe"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/preview"
)

// compactBody is a request as gateways send them: no padding, so the
// decoder's one copy of the body is about the size of its fields.
func compactBody(i int) []byte {
	return []byte(`{"method":"GET","path":"/products/` + strconv.Itoa(i) + `","host":"shop.example.com","scheme":"https",` +
		`"headers":{"cf-ipcountry":"GB","user-agent":"Mozilla/5.0 (X11; Linux x86_64)"},"source_ip":"73.140.173.241",` +
		`"time":"2025-05-31T12:10:40Z"}`)
}

// TestRecorderKeepsSmallDecodedRequests (issue 26): a request decoded
// from a small body is recorded as it is, not copied (the copy was most of
// preview's cost per live decision), and the heap the recorder then holds
// (the requests and the bodies their strings share) stays within what it
// counts.
func TestRecorderKeepsSmallDecodedRequests(t *testing.T) {
	const n = 2000
	r := preview.NewRecorder(n, 1<<30)
	var first *engine.Request
	recordWithinCount(t, r, n, "compact requests of "+strconv.Itoa(len(compactBody(0)))+" bytes", func(i int) {
		body := compactBody(i)
		req, err := engine.DecodeRequest(body)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = req
		}
		r.AddDecoded("web", req, len(body))
	})
	if got := r.Requests("web"); got[0] != first {
		t.Errorf("the first request was copied; a request from a small body is kept as it is")
	}
}

// TestRecorderCopiesDecodedPaddedRequests: a request decoded from a large
// body is copied as Add copies it, so a padded body pins nothing the
// recorder does not count.
func TestRecorderCopiesDecodedPaddedRequests(t *testing.T) {
	body := paddedBody(3)
	req, err := engine.DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	r := preview.NewRecorder(10, 1<<20)
	r.AddDecoded("web", req, len(body))
	got := r.Requests("web")
	if len(got) != 1 || got[0] == req || got[0].Path != req.Path {
		t.Fatalf("recorded %v", got)
	}
	if unsafe.StringData(got[0].Path) == unsafe.StringData(req.Path) {
		t.Error("the recorded path aliases the padded body")
	}
	if _, bytes := r.Usage(); bytes > int64(len(body)) {
		t.Errorf("a copy counted %d bytes, more than the padded body's %d: the padding was kept", bytes, len(body))
	}
}
