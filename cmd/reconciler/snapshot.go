package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/policyrollout/reconciler/internal/backup"
	"github.com/policyrollout/reconciler/internal/raftstore"
)

// snapshotUsage lists the subcommands of `reconciler snapshot`.
const snapshotUsage = `save FILE [--server URL]  |  inspect FILE  |  restore FILE --data-dir DIR --node-id ID [flags]

  save     ask the leader for a consistent snapshot of the replicated state (admin token) and write it to FILE
  inspect  print FILE's header and check its checksum and that the state it holds decodes
  restore  seed a stopped node's data directory from FILE (a new cluster, or a node whose data was lost)

Run 'reconciler snapshot save -h' (inspect, restore) for each one's flags.`

// raftDirName is where a node keeps raft inside node.data_dir
// (internal/node).
const raftDirName = "raft"

// snapshot implements `reconciler snapshot save|inspect|restore`.
func (a *app) snapshot(args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "save":
			return a.snapshotSave(args[1:])
		case "inspect":
			return a.snapshotInspect(args[1:])
		case "restore":
			return a.snapshotRestore(args[1:])
		}
	}
	fs := a.flagSet("snapshot", snapshotUsage)
	if code, ok := a.parse(fs, args, 0, 0); !ok {
		return code
	}
	fs.Usage()
	return exitUsage
}

// parseFile parses flags that may come before or after the one FILE
// argument ("save FILE --server URL" reads as well as "save --server URL
// FILE"), and returns FILE.
func (a *app) parseFile(fs *flag.FlagSet, args []string) (string, int, bool) {
	var files []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", exitOK, false
			}
			return "", exitUsage, false
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(files) != 1 {
		fmt.Fprintf(a.stderr, "reconciler %s: want one FILE, got %d\n", fs.Name(), len(files))
		fs.Usage()
		return "", exitUsage, false
	}
	return files[0], exitOK, true
}

func (a *app) snapshotSave(args []string) int {
	fs := a.flagSet("snapshot save", "FILE [--server URL] [--token-env NAME] [--timeout D]  |  FILE --data-dir DIR --node-id ID")
	// The connection flags of every remote command (a follower points to
	// the leader, which takes the snapshot); --timeout bounds the whole
	// transfer.
	cf := addClientFlags(fs, "admin", 30*time.Minute)
	dataDir := fs.String("data-dir", "", "offline: read the state of the stopped node whose node.data_dir is `DIR` instead "+
		"of asking a leader (lost quorum); the file is only as recent as that node")
	nodeID := fs.String("node-id", "", "offline: the `ID` of that node, recorded in the header")
	file, code, ok := a.parseFile(fs, args)
	if !ok {
		return code
	}
	if *dataDir != "" {
		var h backup.Header
		err := writeAtomic(file, func(w io.Writer) (err error) {
			h, err = backup.SaveOffline(w, filepath.Join(*dataDir, raftDirName), *nodeID, time.Now())
			return err
		})
		if err != nil {
			fmt.Fprintf(a.stderr, "reconciler snapshot save: %v\n", err)
			return exitCheck
		}
		a.printSaved(file, h)
		return exitOK
	}
	// remote: bad connection flags are a usage error, as for every other
	// remote command; what the server or the transfer says is a failure.
	return a.remote("snapshot save", cf, func(c *apiClient) error {
		ctx, cancel := context.WithTimeout(a.ctx, c.timeout)
		defer cancel()
		h, err := saveSnapshot(ctx, c, file)
		if err == nil {
			a.printSaved(file, h)
		}
		return err
	})
}

// printSaved is the line a successful save prints.
func (a *app) printSaved(file string, h backup.Header) {
	fmt.Fprintf(a.stdout, "saved %s: generation %s, raft index %d, %d bytes, checksum verified\n",
		file, generationLabel(h.ActiveGeneration, h.Commit), h.Index, h.Size)
}

// saveSnapshot downloads a snapshot file into path: written beside it,
// checked as it arrives, and renamed into place only when whole.
func saveSnapshot(ctx context.Context, c *apiClient, path string) (h backup.Header, err error) {
	resp, err := getSnapshot(ctx, c)
	if err != nil {
		return backup.Header{}, err
	}
	defer resp.Body.Close()
	err = writeAtomic(path, func(w io.Writer) (err error) {
		h, err = copyChecked(w, resp.Body)
		return err
	})
	return h, err
}

// writeAtomic writes path through fill: into a file beside it, synced
// and renamed into place only when fill succeeded.
func writeAtomic(path string, fill func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".partial-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	err = fill(tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// copyChecked copies a snapshot file from r to w, checking it on the way.
func copyChecked(w io.Writer, r io.Reader) (backup.Header, error) {
	fr, err := backup.NewReader(io.TeeReader(r, w))
	if err != nil {
		return backup.Header{}, fmt.Errorf("the answer: %w", err)
	}
	if err := fr.Verify(); err != nil {
		return fr.Header, fmt.Errorf("the answer: %w", err)
	}
	return fr.Header, nil
}

// getSnapshot asks base for GET /v1/snapshot. A follower answers 307 to
// the leader's API; that one redirect is followed with the same token,
// on the same scheme only.
// Every node holds the same tokens, so the one it points to learns none
// it did not have; the shared client (which follows no redirect) keeps its
// TLS settings for the hop.
func getSnapshot(ctx context.Context, c *apiClient) (*http.Response, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/v1/snapshot", nil)
	if err != nil {
		return nil, err
	}
	token := c.token
	client := *c.http
	client.CheckRedirect = func(next *http.Request, via []*http.Request) error {
		if len(via) > 1 || next.URL.Scheme != via[0].URL.Scheme {
			return http.ErrUseLastResponse
		}
		if token != "" {
			next.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %w (is a node running there? use --server URL)", c.base, unwrapURL(err))
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		// The node that answered: the leader, after a redirect.
		return nil, answerError(resp.Request.URL.Scheme+"://"+resp.Request.URL.Host, resp, body)
	}
	return resp, nil
}

func (a *app) snapshotInspect(args []string) int {
	fs := a.flagSet("snapshot inspect", "FILE [--format text|json]")
	format := fs.String("format", "text", "output `format`: text or json (the header)")
	file, code, ok := a.parseFile(fs, args)
	if !ok {
		return code
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(a.stderr, "reconciler snapshot inspect: --format %q must be text or json\n", *format)
		return exitUsage
	}
	f, err := os.Open(file)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler snapshot inspect: %v\n", err)
		return exitCheck
	}
	defer f.Close()
	h, st, err := backup.Inspect(f)
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler snapshot inspect: %s: %v\n", file, err)
		return exitCheck
	}
	if *format == "json" {
		out, _ := json.MarshalIndent(h, "", "  ")
		fmt.Fprintf(a.stdout, "%s\n", out)
		return exitOK
	}
	printHeader(a.stdout, file, h, st)
	return exitOK
}

func printHeader(w io.Writer, file string, h backup.Header, st *raftstore.State) {
	tw := newTable(w)
	fmt.Fprintf(tw, "File:\t%s (checksum verified, state decoded)\n", file)
	fmt.Fprintf(tw, "Taken:\t%s by %s\n", stamp(h.Time), h.NodeID)
	fmt.Fprintf(tw, "Raft index, term:\t%d, %d\n", h.Index, h.Term)
	fmt.Fprintf(tw, "Active generation:\t%s\n", generationLabel(h.ActiveGeneration, h.Commit))
	fmt.Fprintf(tw, "Generations:\t%d\n", len(st.Generations))
	fmt.Fprintf(tw, "Experiments:\t%d\n", len(st.Experiments))
	fmt.Fprintf(tw, "Nodes:\t%d\n", len(st.Nodes))
	fmt.Fprintf(tw, "Snapshot bytes:\t%d\n", h.Size)
	for _, s := range h.Servers {
		role := "non-voter"
		if s.Voter {
			role = "voter"
		}
		fmt.Fprintf(tw, "Server:\t%s %s (%s)\n", s.ID, s.Address, role)
	}
	tw.Flush()
}
