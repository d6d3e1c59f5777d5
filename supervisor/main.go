// trainop-supervisor runs a rank's command as its child and stands in for it as the
// container's main process: a container whose command is
//
//	trainop-supervisor -- COMMAND [ARG...]
//
// behaves as COMMAND alone would. The child is exec'd directly (no shell) with the
// supervisor's standard streams and environment, in a process group of its own (where
// stdin is no terminal: a terminal's foreground group stays the supervisor's); the signals
// the supervisor gets are passed on to it, as a container runtime signals its main process
// only; every process the child leaves behind is reaped, as a container's PID 1 must
// (elsewhere the supervisor makes itself their subreaper); and the supervisor ends with
// the child's exit code, 128+N where signal N ended it, as a shell says.
//
// An init container puts the supervisor where the main container finds it (an emptyDir
// both mount), with no shell or cp in the image it comes from:
//
//	trainop-supervisor --install DIR
//
// copies the supervisor's own executable to DIR/trainop-supervisor.
//
// Standard library only, built with CGO_ENABLED=0: one static file that needs nothing of
// the image it runs in (no shell, no libc).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"unsafe"
)

const name = "trainop-supervisor"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER (linux/prctl.h).
const prSetChildSubreaper = 36

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 2 && args[0] == "--install" {
		return install(args[1])
	}
	if len(args) < 2 || args[0] != "--" {
		fmt.Fprintf(os.Stderr, "%s: usage: %s -- COMMAND [ARG...] | %s --install DIR\n",
			name, name, name)
		return 2
	}
	argv := args[1:]
	path, err := exec.LookPath(argv[0])
	if errors.Is(err, exec.ErrDot) {
		err = nil // found through a relative PATH entry: a container runtime runs it too
	}
	if err != nil {
		return cannotStart(argv[0], err)
	}
	// caught before the child exists: none is lost between its start and the first read
	signals := make(chan os.Signal, 64)
	signal.Notify(signals)
	if os.Getpid() != 1 {
		// its orphans become ours to reap, as they would be PID 1's in a container
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	}
	attr := &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Setpgid: !isTerminal(0)},
	}
	child, err := syscall.ForkExec(path, argv, attr)
	if err != nil {
		return cannotStart(argv[0], err)
	}
	for sig := range signals {
		switch sig {
		case syscall.SIGCHLD:
			if code, ended := reap(child); ended {
				return code
			}
		case syscall.SIGURG:
			// the Go runtime's own (goroutine preemption), never sent to the supervisor
		default:
			_ = syscall.Kill(child, sig.(syscall.Signal))
		}
	}
	return 1 // not reached: the channel is never closed
}

// install copies the running executable to dir/name: written aside and renamed, so a
// container that starts the supervisor never finds half of it.
func install(dir string) int {
	if err := copyExecutable(filepath.Join(dir, name)); err != nil {
		fmt.Fprintf(os.Stderr, "%s: cannot install into %s: %v\n", name, dir, err)
		return 1
	}
	fmt.Printf("%s: installed in %s\n", name, dir)
	return 0
}

func copyExecutable(dest string) error {
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer self.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+name+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone once renamed; left by nothing else
	_, err = io.Copy(tmp, self)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if closed := tmp.Close(); err == nil {
		err = closed
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), dest)
}

// reap collects every child that has ended; whether `child` was one of them, and its
// exit code as a shell gives it.
func reap(child int) (int, bool) {
	code, ended := 0, false
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return code, ended
		}
		if pid == child {
			ended = true
			code = status.ExitStatus()
			if status.Signaled() {
				code = 128 + int(status.Signal())
			}
		}
	}
}

// cannotStart says why COMMAND could not be run, in one line, and gives a shell's code for
// it: 126 where it is there but cannot be run, 127 where it is not there.
func cannotStart(command string, err error) int {
	fmt.Fprintf(os.Stderr, "%s: cannot start %q: %v\n", name, command, err)
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOEXEC) ||
		errors.Is(err, exec.ErrNotFound) && isThere(command) {
		return 126
	}
	return 127
}

func isThere(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func isTerminal(fd int) bool {
	var termios syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TCGETS,
		uintptr(unsafe.Pointer(&termios)))
	return errno == 0
}
