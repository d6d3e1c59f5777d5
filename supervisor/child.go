package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// mostAttempts is the largest attempt (an int32, as a restart count is).
const mostAttempts = 1<<31 - 1

// The rank's phases, as the channel says them.
const (
	running  = "running"  // the child of `attempt` runs
	stopping = "stopping" // it is being stopped, with what it left, for a newer attempt
	exited   = "exited"   // it ended on its own
	held     = "held"     // nothing runs: waiting until `attempt` is released
)

const (
	prSetDumpable       = 4  // PR_SET_DUMPABLE (linux/prctl.h)
	prSetChildSubreaper = 36 // PR_SET_CHILD_SUBREAPER
	tick                = 200 * time.Millisecond
)

// told is what the manager tells a pod of the job's attempts (as the pod's annotations
// say it, engine/inplace.py).
type told struct {
	Attempt  int  `json:"attempt"`
	Released int  `json:"released"`
	Finish   bool `json:"finish"`
}

// newer: told after u (attempts only grow, and finish comes last): an older word, told
// again or late, changes nothing.
func (t told) newer(u told) bool {
	if t.Attempt != u.Attempt {
		return t.Attempt > u.Attempt
	}
	if t.Released != u.Released {
		return t.Released > u.Released
	}
	return t.Finish && !u.Finish
}

// ended is how the child ended.
type ended struct {
	Code   int    `json:"code"`
	Signal int    `json:"signal,omitempty"`
	At     string `json:"at"`
	Reason string `json:"reason,omitempty"` // oomKilled, or none
}

// oomKilled is the reason of a child the kernel's OOM killer ended, as a container runtime
// names a container's end whose cgroup ran out of memory.
const oomKilled = "OOMKilled"

// memoryEvents are where a container's cgroup counts the processes the OOM killer ended
// (`oom_kill N`): cgroup v2's file, then v1's.
var memoryEvents = []string{"/sys/fs/cgroup/memory.events",
	"/sys/fs/cgroup/memory/memory.oom_control"}

// oomKills is the count of processes the OOM killer ended in the container's cgroup, read
// from the first of `paths` that holds it; -1 where none does.
func oomKills(paths []string) int64 {
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if count, ok := strings.CutPrefix(line, "oom_kill "); ok {
				if n, err := strconv.ParseInt(count, 10, 64); err == nil && n >= 0 {
					return n
				}
			}
		}
	}
	return -1
}

type supervisor struct {
	opts    options
	argv    []string
	path    string
	env     []string
	channel *channel // nil: nothing is told, the supervisor ends with its child

	mu          sync.Mutex
	child       int // 0: none
	attempt     int
	phase       string
	last        *ended
	ooms        int64 // the cgroup's OOM kills as the child started (-1: unknown)
	told        told
	stopAt      time.Time
	terminating bool // the container is being stopped: the child's end is the supervisor's
	heard       time.Time
	heardNoted  bool // --heard exists
	seq         uint64
	changed     chan struct{}
	code        int // what the supervisor ends with, once `over`
	over        bool

	progressNext time.Time // when the progress file is read next
	progressSeen string    // its time, size and inode when last read
	progressNow  report    // what the state shows of it
}

func becomeSubreaper() {
	if os.Getpid() != 1 {
		// its orphans become ours to reap, as they would be PID 1's in a container
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	}
}

// start runs the command as the child for the supervisor's attempt.
func (s *supervisor) start() error {
	env := s.env
	if s.opts.listen != "" {
		env = withAttempt(env, s.attempt)
	}
	if s.opts.progress != "" {
		env = append(withoutVar(env, progressEnv), progressEnv+"="+s.opts.progress)
	}
	attr := &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: !isTerminal(0)},
	}
	child, err := syscall.ForkExec(s.path, s.argv, attr)
	if err != nil {
		return err
	}
	s.child, s.phase, s.last = child, running, nil
	s.ooms = oomKills(s.opts.memoryEvents)
	s.noteState()
	s.bump()
	return nil
}

// withAttempt is env with TRAINOP_ATTEMPT set to the attempt the child runs.
func withAttempt(env []string, attempt int) []string {
	return append(withoutVar(env, "TRAINOP_ATTEMPT"), "TRAINOP_ATTEMPT="+strconv.Itoa(attempt))
}

// withoutVar is env without the variable `name`.
func withoutVar(env []string, name string) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// loop runs until the supervisor ends, and says with which code.
func (s *supervisor) loop(signals chan os.Signal) int {
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		select {
		case sig := <-signals:
			s.mu.Lock()
			switch sig {
			case syscall.SIGCHLD:
				s.reap()
			case syscall.SIGURG:
				// the Go runtime's own (goroutine preemption), never sent to the supervisor
			default:
				s.forward(sig.(syscall.Signal))
			}
			s.mu.Unlock()
		case <-ticker.C:
			s.mu.Lock()
			s.tick()
			s.mu.Unlock()
		}
		s.mu.Lock()
		code, over := s.code, s.over
		s.mu.Unlock()
		if over {
			s.mu.Lock()
			s.noteHeard(false) // nothing of this supervisor's is left to defer to
			s.mu.Unlock()
			return code
		}
	}
}

// forward passes a signal on to the child, as a container runtime signals its main process
// only. One that stops the container, with no child left, ends the supervisor.
func (s *supervisor) forward(sig syscall.Signal) {
	if sig == syscall.SIGTERM || sig == syscall.SIGINT {
		s.terminating = true
	}
	if s.child != 0 {
		_ = syscall.Kill(s.child, sig)
	} else if s.terminating {
		s.end(s.lastCode(128 + int(sig)))
	}
}

// reap collects every child that has ended, and acts on the end of the rank's.
func (s *supervisor) reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			break
		}
		if pid != s.child {
			continue
		}
		e := &ended{Code: status.ExitStatus(), At: time.Now().UTC().Format(time.RFC3339Nano)}
		if status.Signaled() {
			e.Signal = int(status.Signal())
			e.Code = 128 + e.Signal
			// killed while its cgroup's OOM kills grew: the OOM killer's, as the container
			// runtime would say of a container that ended so
			if status.Signal() == syscall.SIGKILL && s.ooms >= 0 &&
				oomKills(s.opts.memoryEvents) > s.ooms {
				e.Reason = oomKilled
			}
		}
		s.child, s.last = 0, e
		s.progressNext = time.Time{} // its last report goes with its end
		s.readProgress(time.Now())
		switch {
		case s.channel == nil || s.terminating:
			s.end(e.Code) // the container ends as the command did
		case s.phase == stopping:
			signalLeft(0, syscall.SIGTERM) // what it left, orphaned to us now, goes too
		default:
			s.phase = exited
		}
		s.bump()
	}
	s.act()
}

// tick reads the attempt files and the rank's progress, ends the supervisor where its
// manager went quiet after its rank ended, and carries on a stop.
func (s *supervisor) tick() {
	// the files say what the annotations say, late: a second source while the manager is
	// heard (a tell it lost), never the only one (unheard, the pod's agent and barrier
	// restart it, and the manager would not see this rank held)
	if s.opts.files != "" && s.connected() {
		if t, ok := readTold(s.opts.files); ok && t.newer(s.told) {
			s.told = t
			s.bump()
		}
	}
	if s.heardNoted && !s.connected() {
		s.noteHeard(false)
	}
	if s.readProgress(time.Now()) {
		s.bump()
	}
	if s.phase == exited && !s.connected() {
		// no manager heard within the lease (or ever) to tell what comes next: the
		// kubelet's path takes over, the container ends as its rank did
		s.end(s.last.Code)
		return
	}
	s.act()
}

// act moves the rank on to what it was last told.
func (s *supervisor) act() {
	if s.over {
		return
	}
	switch s.phase {
	case running, exited:
		if s.told.Attempt > s.attempt {
			s.phase, s.stopAt = stopping, time.Now().Add(s.opts.grace)
			signalLeft(s.child, syscall.SIGTERM)
			s.bump()
			s.act()
		} else if s.phase == exited && s.told.Finish {
			s.end(s.last.Code)
		}
	case stopping:
		if !time.Now().Before(s.stopAt) {
			signalLeft(s.child, syscall.SIGKILL)
		}
		if s.child == 0 && !hasChildren() {
			s.phase, s.attempt = held, s.told.Attempt
			s.noteState()
			s.bump()
			s.act()
		}
	case held:
		if s.told.Attempt > s.attempt {
			s.attempt = s.told.Attempt
			s.noteState()
			s.bump()
		}
		if s.told.Finish {
			s.end(s.lastCode(0))
		} else if s.told.Released >= s.attempt {
			if err := s.start(); err != nil {
				fmt.Fprintf(os.Stderr, "%s: cannot start attempt %d: %v\n", name, s.attempt, err)
				s.end(127)
			}
		}
	}
}

func (s *supervisor) end(code int) {
	s.code, s.over = code, true
}

func (s *supervisor) lastCode(otherwise int) int {
	if s.last != nil {
		return s.last.Code
	}
	return otherwise
}

// connected: the manager was heard within the lease.
func (s *supervisor) connected() bool {
	return s.channel != nil && !s.heard.IsZero() && time.Since(s.heard) < s.opts.lease
}

// bump tells the channel's waiting readers that the state changed.
func (s *supervisor) bump() {
	s.seq++
	if s.changed != nil {
		close(s.changed)
	}
	s.changed = make(chan struct{})
}

// noteState writes the attempt the pod is in to --state, where the pod's agent reads it:
// a pod whose supervisor stopped for the attempt it was told is not restarted by its
// kubelet (engine/inplace.py).
func (s *supervisor) noteState() {
	if s.opts.state == "" {
		return
	}
	tmp := s.opts.state + ".tmp"
	err := os.WriteFile(tmp, []byte(strconv.Itoa(s.attempt)+"\n"), 0o644)
	if err == nil {
		err = os.Rename(tmp, s.opts.state)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: cannot note attempt %d: %v\n", name, s.attempt, err)
	}
}

// noteHeard makes --heard exist while the manager is heard, where the pod's agent looks
// before it restarts the pod's containers for a newer attempt: while it exists, this
// supervisor stops the rank itself (engine/inplace.py).
func (s *supervisor) noteHeard(on bool) {
	if s.opts.heard == "" || on == s.heardNoted {
		return
	}
	var err error
	if on {
		err = os.WriteFile(s.opts.heard, nil, 0o644)
	} else if err = os.Remove(s.opts.heard); errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: cannot note whether the manager is heard: %v\n", name, err)
		return
	}
	s.heardNoted = on
}

// readTold reads the attempt files the pod's downward API volume keeps (attempt, released,
// finish); a file that does not hold what it should is not read at all.
func readTold(dir string) (told, bool) {
	var t told
	var ok bool
	if t.Attempt, ok = readNumber(dir + "/attempt"); !ok {
		return t, false
	}
	if t.Released, ok = readNumber(dir + "/released"); !ok || t.Released > t.Attempt {
		return t, false
	}
	finish, err := os.ReadFile(dir + "/finish")
	t.Finish = err == nil && strings.TrimSpace(string(finish)) == "true"
	return t, true
}

// readNumber reads a file holding an attempt: ASCII digits only, at most mostAttempts.
func readNumber(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 16 {
		return 0, false
	}
	text := strings.TrimSpace(string(b))
	if text == "" || strings.Trim(text, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(text)
	return n, err == nil && n <= mostAttempts
}

// signalLeft signals the child's process group and every process left to the supervisor
// (a rank's daemon in a session of its own, orphaned to it as subreaper or PID 1): its
// children, as the kernel lists them for each of its threads.
func signalLeft(child int, sig syscall.Signal) {
	if child != 0 {
		_ = syscall.Kill(-child, sig)
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(field); err == nil {
				_ = syscall.Kill(pid, sig)
			}
		}
	}
}

// hasChildren reaps what has ended, and says whether a child of the supervisor lives on.
func hasChildren() bool {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR) || pid > 0:
			continue
		case errors.Is(err, syscall.ECHILD):
			return false
		default:
			return true // one lives (pid 0), or the kernel would not say: wait on
		}
	}
}

func isTerminal(fd int) bool {
	var termios syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS,
		uintptr(unsafe.Pointer(&termios)))
	return errno == 0
}
