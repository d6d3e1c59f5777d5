// trainop-supervisor runs a rank's command as its child and stands in for it as the
// container's main process: a container whose command is
//
//	trainop-supervisor [--listen ADDR --pod NAME ...] -- COMMAND [ARG...]
//
// behaves as COMMAND alone would. The child is exec'd directly (no shell) with the
// supervisor's standard streams and environment, in a process group of its own (where
// stdin is no terminal: a terminal's foreground group stays the supervisor's); the signals
// the supervisor gets are passed on to it, as a container runtime signals its main process
// only; every process the child leaves behind is reaped, as a container's PID 1 must
// (elsewhere the supervisor makes itself their subreaper); and the supervisor ends with
// the child's exit code, 128+N where signal N ended it, as a shell says.
//
// With --listen and a key in TRAINOP_SUPERVISOR_KEY it also serves the manager's channel
// (channel.go): the manager tells it the job's attempts, and it stops its rank's processes
// for a newer attempt and starts them again when that attempt is released, in the same
// container; it says how its rank ended (OOMKilled where the kernel's OOM killer ended it,
// as the container's cgroup counts: --memory-events names another file for tests) and
// where it is, and (--progress) the rank's latest progress report, at most once per
// --progress-every. For the pod's agent, which
// restarts the pod's containers where no supervisor does it, it notes the attempt it is in
// (--state) and keeps a file while the manager is heard (--heard).
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
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

const name = "trainop-supervisor"

// keyEnv holds the channel's key; the child never sees it.
const keyEnv = "TRAINOP_SUPERVISOR_KEY"

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 2 && args[0] == "--install" {
		return install(args[1])
	}
	key, args, err := takeKey(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 2
	}
	opts, argv, err := parse(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n%s: usage: %s [--listen ADDR --pod NAME --attempt N "+
			"--files DIR --state FILE --heard FILE --grace S --lease S --memory-events FILE "+
			"--progress FILE --progress-every S] -- COMMAND [ARG...] | %s --install DIR\n",
			name, err, name, name, name)
		return 2
	}
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
	becomeSubreaper()
	s := &supervisor{opts: opts, argv: argv, path: path, env: os.Environ(), attempt: opts.attempt}
	if opts.files != "" {
		if t, ok := readTold(opts.files); ok {
			// the attempt the pod's barrier let it into (the command's --attempt is the
			// one it was made for, before any restart of its containers)
			s.told, s.attempt = t, t.Attempt
		}
	}
	if opts.listen != "" {
		ch, err := listen(opts, key, s)
		if err != nil {
			// the manager hears nothing: the pod restarts by the kubelet's path
			fmt.Fprintf(os.Stderr, "%s: no channel: %v\n", name, err)
		} else {
			s.channel = ch
		}
	}
	s.mu.Lock() // the channel may be told something already
	err = s.start()
	s.mu.Unlock()
	if err != nil {
		return cannotStart(argv[0], err)
	}
	return s.loop(signals)
}

type options struct {
	listen  string
	pod     string
	attempt int
	files   string
	state   string
	heard   string
	grace   time.Duration
	lease   time.Duration
	// where the container's cgroup counts OOM kills (memoryEvents; a test names its own)
	memoryEvents []string
	// where the child writes its progress reports, and how often they are passed on
	progress      string
	progressEvery time.Duration
}

func parse(args []string) (options, []string, error) {
	var o options
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&o.listen, "listen", "", "")
	fs.StringVar(&o.pod, "pod", "", "")
	fs.IntVar(&o.attempt, "attempt", 0, "")
	fs.StringVar(&o.files, "files", "", "")
	fs.StringVar(&o.state, "state", "", "")
	fs.StringVar(&o.heard, "heard", "", "")
	fs.DurationVar(&o.grace, "grace", 30*time.Second, "")
	fs.DurationVar(&o.lease, "lease", 15*time.Second, "")
	events := fs.String("memory-events", "", "")
	fs.StringVar(&o.progress, "progress", "", "")
	fs.DurationVar(&o.progressEvery, "progress-every", 10*time.Second, "")
	if err := fs.Parse(args); err != nil {
		return o, nil, err
	}
	o.memoryEvents = memoryEvents
	if *events != "" {
		o.memoryEvents = []string{*events}
	}
	rest := fs.Args()
	// the flag package stops at "--" and drops it; what follows must be a command
	if i := len(args) - len(rest) - 1; i < 0 || args[i] != "--" || len(rest) == 0 {
		return o, nil, errors.New("no -- COMMAND")
	}
	if o.attempt < 0 || o.attempt > mostAttempts || o.grace < 0 || o.lease <= 0 ||
		o.progressEvery <= 0 {
		return o, nil, errors.New("--attempt, --grace, --lease or --progress-every out of range")
	}
	if o.listen != "" && o.pod == "" {
		return o, nil, errors.New("--listen needs --pod")
	}
	return o, rest, nil
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
