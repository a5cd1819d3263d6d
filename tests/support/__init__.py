"""What the tests share: real servers and agents to drive (tmux sockets, sshd, fake model
servers, stand-in agents and dialogs), and waiting on conditions with deadlines."""
