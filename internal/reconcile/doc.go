// Package reconcile is the leader loop: the leadership term, triggers,
// promotion of main and rollback. Its partners run beside it on the
// leader and are reached through small interfaces declared here:
// internal/experiments (the AIP-236 experiments: Experiments) and, with
// [github], internal/github (pull requests, statuses, comments and
// comment commands: Pulls). Each pass is an ordered list of small steps
// (pass.go), as flux's source-controller does it, every step handing the
// next what it computed in memory:
//
//  1. Fetch the policy repository (Source, a bare clone in the leader's
//     data directory). A failure is the PullError condition: kept in the
//     leader's memory for the cluster view and as a replicated record
//     (SourceRecord), so every node shows it; the first successful fetch
//     clears it. The active generation keeps serving.
//  2. Skip the pass when no ref moved since the last one: an idle poll
//     costs one ref listing and writes nothing to raft.
//  3. Turn every new commit of the live branch into a generation, oldest
//     first (syncMain): validate it (load, merge, compile, policy tests);
//     record an invalid one INVALID with its errors (MarkInvalid); stage
//     the newest valid one (StageGeneration). Commits that change no
//     policy make no generation.
//  4. Record the sources of experiments: each other branch
//     (BranchRecord: which policies it changes and whether it validates,
//     written only when that changed), or with [github] each open pull
//     request (Pulls.SyncPulls).
//  5. Hand what each source changes to the experiment service, which
//     keeps the experiments "branch-<name>" or "pr-N" in step.
//
// Beside the passes, the promoter activates the staged generation once
// every reachable node has reported Ready (two-phase promotion). The loop
// keeps the term, the pass and promotion; what the pass and its partners
// share lives in parts it owns: Trees reads, merges and validates trees,
// Committer writes experiments to the live branch, and Rollbacks writes a
// revert commit for the normal path to promote.
//
// The loop runs only on the leader. A new leader resumes from the
// replicated state alone: it continues after the newest generation's
// commit, and the state machine activates only a STAGED generation, so
// nothing is recorded or promoted twice. It does no compiling for
// serving: nodes compile staged generations themselves (internal/node).
// docs/git.md describes the behaviour for users.
package reconcile
