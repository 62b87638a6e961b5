package harness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// ReleasesFile lists the releases and their commits at the module's root.
const ReleasesFile = "RELEASES"

// ReleaseCommit is the commit RELEASES names for release (e.g. "v1.0.0").
func ReleaseCommit(release string) (string, error) {
	f, err := os.Open(filepath.Join(ModuleRoot(), ReleasesFile))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[0] == release {
			return fields[1], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s names no release %s", ReleasesFile, release)
}

// ReleaseBinary builds release from the repository's own history (the
// commit RELEASES names, taken with git archive into a directory of the
// test's, built with the module cache) and returns the binary's path.
// It needs the commit in the checkout's history, as a CI clone has it.
func ReleaseBinary(t testing.TB, release string) string {
	t.Helper()
	commit, err := ReleaseCommit(release)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src, tar := filepath.Join(dir, "src"), filepath.Join(dir, "src.tar")
	// Twice a build's time: the module's packages build anew in another
	// directory, beside every other test package's processes.
	ctx, cancel := context.WithTimeout(context.Background(), 2*BuildTimeout)
	defer cancel()
	steps := [][]string{
		{"git", "-C", ModuleRoot(), "archive", "--format=tar", "-o", tar, commit},
		{"mkdir", "-p", src},
		{"tar", "-xf", tar, "-C", src},
		// Without -trimpath, which would rebuild every dependency: the
		// build cache holds them as the module's own build made them.
		{"go", "build", "-o", filepath.Join(dir, "reconciler"), "./cmd/reconciler"},
	}
	for _, args := range steps {
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		cmd.Dir, cmd.Env = src, ChildEnv()
		if args[0] != "go" {
			cmd.Dir = dir
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building %s at %s: %s: %v\n%s", release, commit, strings.Join(args, " "), err, out)
		}
	}
	return filepath.Join(dir, "reconciler")
}
