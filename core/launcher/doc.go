// Package launcher is the small program a socket-activated Container
// starts with (compose x-socket-activation). Docker cannot pass a file
// descriptor into a Container, so the Machine bind-mounts this launcher
// read-only at Path as the Container's entrypoint, with the image's own
// entrypoint and command as its arguments, and a unix socket of that
// Container's own at SocketDir. The launcher asks that socket for the
// listening socket the Machine holds on the host port, receives it over
// SCM_RIGHTS, makes it fd 3, sets LISTEN_FDS=1, LISTEN_PID (its own pid,
// which exec keeps) and LISTEN_FDNAMES as systemd's socket activation
// does (sd_listen_fds(3)), and execs the original command.
//
// The daemon answers only a peer placed inside the Container the socket
// was made for (core/daemon, sockact.go). The launcher uses raw system
// calls only: Go's network poller would take an fd of its own, and the
// launcher must leave nothing but fds 0-3 to the program it execs.
package launcher
