// End-to-end tests of the `sqllock` command on SQLite (suite `cli`, split by topic over
// cli_*_test.cpp, issue 12; fixture in cli_fixture.hpp): CMD at a terminal: reading it, Ctrl-C, messages with `stty tostop`, Ctrl-Z and fg.
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <ctime>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "process_runner.hpp"
#include "cli_fixture.hpp"
#include "sqlite_fixture.hpp"
#include "terminal_session.hpp"

using namespace std::chrono_literals;
using namespace cli_test;

namespace {

TEST_F(cli, interactive_command_gets_the_terminal) {
  // `script` (util-linux, Essential in Debian) runs sqllock on a pseudo-terminal in its
  // foreground: CMD must be able to read the terminal (it runs in its own process group).
  write_file("input", "hello\n");
  write_file("cmd.sh", "read x; echo \"got $x\" > " + path("read") + "; exit 4\n");
  const std::string inner = cli_path() + " run --url " + url_ + " --name tty -- /bin/sh " + path("cmd.sh");
  process_options options;
  options.stdin_path = path("input");
  const auto r = run_process({"script", "-qec", inner, "/dev/null"}, options);
  EXPECT_EQ(r.exit_code, 4) << r.out << r.err;
  EXPECT_EQ(trimmed_file("read"), "got hello");
}

TEST_F(cli, ctrl_c_on_the_terminal_reaches_the_command_once) {
  write_file("cmd.sh", "trap 'echo int >> " + path("ints") + "; exit 5' INT\necho x > " + path("started") +
                           "\nwhile :; do sleep 0.05; done\n");
  const std::string inner =
      cli_path() + " run --url " + url_ + " --name tty -- /bin/sh " + path("cmd.sh") + "; echo $? > " + path("rc");
  // Type Ctrl-C on the terminal once CMD runs; keep the terminal open a little longer.
  write_file("outer.sh",
             "(n=0; while [ ! -s " + path("started") +
                 " ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done; printf '\\003'; sleep 1) | script -qec '" +
                 inner + "' /dev/null\n");
  const auto r = run_process({"/bin/sh", path("outer.sh")});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(trimmed_file("ints"), "int") << "exactly one SIGINT, delivered by the terminal";
  EXPECT_EQ(trimmed_file("rc"), "5");
  EXPECT_EQ(status_json().items.size(), 0u);
}

TEST_F(cli, messages_while_the_command_has_the_terminal_do_not_stop_sqllock) {
  // With `stty tostop`, a background job writing to the terminal gets SIGTTOU. sqllock is in the
  // background while CMD has the terminal, and must still report a lost lease and exit 76. An
  // interactive bash makes sqllock a job of its own (a process group that is not orphaned, where
  // the kernel would really send SIGTTOU).
  const std::string run = cli_path() + " run --url " + url_ +
                          " --name tty --ttl 2s --grace 200ms -- /bin/sh -c \"echo x > " + path("started") +
                          "; exec sleep 30\"";
  write_file("feed.sh",
             "sleep 0.3\n"
             "printf '%s\\n' 'stty tostop; " +
                 run + "; echo $? > " + path("rc") +
                 "'\n"
                 "n=0; while [ ! -s " +
                 path("rc") +
                 " ] && [ $n -lt 200 ]; do sleep 0.05; n=$((n+1)); done\n"
                 "printf 'exit\\n'; sleep 0.2\n");
  auto p = std::make_unique<background_process>(
      std::vector<std::string>{"/bin/sh", "-c",
                               "/bin/sh " + path("feed.sh") + " | script -qec 'bash --norc --noprofile -i' /dev/null"},
      process_options{});
  if (!wait_for_file(path("started"))) {
    write_file("rc", "x");  // ends the feed
    const auto failed = p->wait(5s);
    FAIL() << "CMD did not start: " << failed.out << failed.err;
  }
  EXPECT_EQ(sqllock({"release", "--url", url_, "--name", "tty", "--force"}).exit_code, 0);
  ASSERT_TRUE(wait_for_file(path("rc")));
  EXPECT_EQ(trimmed_file("rc"), "76");
  const auto r = p->wait(10s);
  EXPECT_NE(r.out.find("sending SIGTERM"), std::string::npos) << "written while in the background: " << r.out;
}

/// Types `sqllock run --name tty -- bash CMD_SH` into the interactive bash of `term` and waits
/// until CMD (which writes its pid to PID_FILE) has the terminal. Returns CMD's pid, the
/// leader of its own process group; 0 after a failure it reports.
pid_t run_cmd_sh_in_foreground(terminal_session& term, const std::string& url, const std::string& cmd_sh,
                               const std::string& pid_file, const std::string& options = "") {
  if (!term.started() || !term.wait_for("$ ")) {
    ADD_FAILURE() << "the interactive bash did not start: " << term.drained();
    return 0;
  }
  term.type(in_foreground(" run --url " + url + " --name tty" + options + " -- bash " + cmd_sh));
  if (!wait_for_file(pid_file)) {
    ADD_FAILURE() << "CMD did not start: " << term.drained();
    return 0;
  }
  const pid_t cmd = std::stoi(read_file(pid_file));
  if (!wait_until([&] { return terminal_foreground_of(cmd) == cmd; })) {
    ADD_FAILURE() << "CMD never had the terminal: " << term.drained();
    ::kill(-cmd, SIGKILL);
    return 0;
  }
  return cmd;
}

TEST_F(cli, ctrl_z_suspends_the_job_and_fg_resumes_it) {
  // An interactive bash on a pseudo-terminal: Ctrl-Z stops CMD and sqllock together (bash sees
  // the job stopped, the lock stays held), `fg` resumes both, Ctrl-C then ends CMD. Each step
  // waits for its observable state (terminal_session.hpp); CMD is a bash script, not dash.
  write_file("cmd.sh", "trap 'echo int >> " + path("ints") + "; exit 5' INT\necho $$ > " + path("pid") +
                           "\nwhile :; do sleep 0.05; done\n");
  terminal_session term;
  const pid_t cmd = run_cmd_sh_in_foreground(term, url_, path("cmd.sh"), path("pid"));
  ASSERT_GT(cmd, 0);
  const command_group_killer cleanup{cmd};
  term.type("\x1a");
  ASSERT_TRUE(term.wait_for("Stopped")) << term.screen();
  ASSERT_TRUE(wait_until([&] { return process_group_stopped(cmd); })) << process_group_states(cmd);
  EXPECT_EQ(status_json().items.size(), 1u) << "the lock stays held while the job is stopped";
  term.type("fg\n");
  ASSERT_TRUE(wait_until([&] { return !process_group_stopped(cmd) && terminal_foreground_of(cmd) == cmd; }))
      << "fg continues CMD and gives it the terminal: " << process_group_states(cmd) << term.screen();
  term.type("\x03");
  ASSERT_TRUE(wait_for_file(path("ints")))
      << "Ctrl-C did not reach CMD; processes (CMD, supervisor, sqllock run, CMD's group):\n"
      << process_report(cmd) << "shell " << process_report(term.shell_pid()) << "screen:\n"
      << term.drained();
  term.type("echo rc=$?.\n");
  EXPECT_TRUE(term.wait_for("rc=5.")) << "fg returns sqllock's exit code, CMD's own: " << term.screen();
  EXPECT_EQ(trimmed_file("ints"), "int");
  EXPECT_EQ(status_json().items.size(), 0u);
}

/// The state letter of process `pid` and its parent's pid (0 if gone).
std::pair<char, pid_t> state_and_parent(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = stat.rfind(')');
  if (paren == std::string::npos) return {0, 0};
  std::istringstream fields(stat.substr(paren + 1));
  char state = 0;
  long ppid = 0;
  fields >> state >> ppid;
  return {state, static_cast<pid_t>(ppid)};
}

/// CMD of the two `bg` tests: writes its pid to PID, waits for the file GO, reads a line from the
/// terminal and writes "got LINE" to GOT, exits 3.
std::string reading_cmd_sh(const std::string& pid, const std::string& go, const std::string& got) {
  return "echo $$ > " + pid + "\nwhile [ ! -e " + go + " ]; do sleep 0.05; done\nread line\necho \"got $line\" > " +
         got + "\nexit 3\n";
}

/// Ctrl-Z on `term`, whose job is `sqllock run` (pid `run`) with CMD (pid `cmd`) in the terminal's
/// foreground, then `bg`: both are seen stopped, then both running again.
void ctrl_z_then_bg(terminal_session& term, pid_t cmd, pid_t run) {
  term.type("\x1a");
  ASSERT_TRUE(term.wait_for("Stopped")) << term.drained();
  ASSERT_TRUE(wait_until([&] { return process_group_stopped(cmd) && state_and_parent(run).first == 'T'; }))
      << process_report(cmd);
  term.type("bg\n");
  ASSERT_TRUE(wait_until([&] { return !process_group_stopped(cmd) && state_and_parent(run).first != 'T'; }))
      << "bg continues sqllock and CMD: " << process_report(cmd) << term.drained();
}

/// The job of the `bg` tests: `sqllock run` (pid `run`) and its CMD (pid `cmd`); `cleanup` kills
/// CMD's group when the test ends.
struct bg_job {
  pid_t cmd = 0, run = 0;
  command_group_killer cleanup;
};

/// Starts `sqllock run` (with `options`, e.g. " --ttl 2s") with CMD `cmd_sh` (which writes its pid to
/// `pid_file`) in `term`'s foreground, then Ctrl-Z and `bg` (ctrl_z_then_bg).
void start_then_bg(terminal_session& term, const std::string& url, const std::string& cmd_sh,
                   const std::string& pid_file, bg_job& job, const std::string& options = "") {
  job.cmd = run_cmd_sh_in_foreground(term, url, cmd_sh, pid_file, options);
  ASSERT_GT(job.cmd, 0);
  job.cleanup.leader = job.cmd;
  const pid_t supervisor = state_and_parent(job.cmd).second;
  job.run = state_and_parent(supervisor).second;
  ASSERT_NO_FATAL_FAILURE(ctrl_z_then_bg(term, job.cmd, job.run));
}

/// CMD of a `bg` test (reading_cmd_sh), reading the terminal now in the foreground, gets "hello"
/// typed there (it writes it to `got`), and the job ends with CMD's exit code, 3.
void command_reads_hello_then_exits(terminal_session& term, const bg_job& job, const std::string& got) {
  term.type("hello\n");
  ASSERT_TRUE(wait_for_file(got)) << "CMD could not read the terminal: " << process_report(job.cmd) << "shell "
                                  << process_report(term.shell_pid()) << term.drained();
  EXPECT_EQ(read_file(got), "got hello\n");
  term.type("echo rc=$?.\n");
  EXPECT_TRUE(term.wait_for("rc=3.")) << "fg returns sqllock's exit code, CMD's own: " << term.screen();
}

/// `fg` of `job`, which `bg` left running: the shell had the terminal, and gives it to the job's
/// group, sqllock's (CMD runs in a group of its own).
void fg_of_the_running_job(terminal_session& term, const bg_job& job) {
  const pid_t shell = term.shell_pid();
  ASSERT_TRUE(wait_until([&] { return terminal_foreground_of(shell) == shell; }))
      << "after bg the shell has the terminal: " << process_report(job.cmd) << term.drained();
  term.type("fg\n");
  ASSERT_TRUE(wait_until([&] { return terminal_foreground_of(shell) == job.run; }))
      << "fg gives the job's group, sqllock's, the terminal: " << process_report(job.cmd) << term.drained();
}

TEST_F(cli, a_job_continued_with_bg_whose_command_reads_the_terminal_leaves_the_terminal_to_the_shell) {
  // Ctrl-Z, then `bg`: the job runs in the background. When CMD then reads the terminal, the
  // kernel stops it (SIGTTIN) and sqllock stops with it, so the shell sees its job stopped. The
  // terminal stays the shell's: sqllock, in the background, must not take it (it may, with SIGTTOU
  // blocked), or the shell could not read the next command. `fg` then gives CMD the terminal.
  write_file("cmd.sh", reading_cmd_sh(path("pid"), path("go"), path("got")));
  terminal_session term;
  bg_job job;
  ASSERT_NO_FATAL_FAILURE(start_then_bg(term, url_, path("cmd.sh"), path("pid"), job));
  const pid_t cmd = job.cmd, run = job.run;
  const pid_t shell = term.shell_pid();  // the interactive bash leads its own group
  EXPECT_EQ(terminal_foreground_of(cmd), shell) << "after bg the shell has the terminal";
  write_file("go", "");  // CMD reads the terminal now, in the background
  ASSERT_TRUE(wait_until([&] { return process_group_stopped(cmd) && state_and_parent(run).first == 'T'; }))
      << "CMD stopped by SIGTTIN, and sqllock with it: " << process_report(cmd) << term.drained();
  EXPECT_EQ(terminal_foreground_of(shell), shell)
      << "the stopped background job left the terminal to the shell: " << process_report(cmd)
      << "shell " << process_report(shell) << term.drained();
  term.type("fg\n");
  ASSERT_TRUE(wait_until([&] { return !process_group_stopped(cmd) && terminal_foreground_of(cmd) == cmd; }))
      << "fg continues CMD and gives it the terminal: " << process_report(cmd) << term.drained();
  ASSERT_NO_FATAL_FAILURE(command_reads_hello_then_exits(term, job, path("got")));
  EXPECT_EQ(status_json().items.size(), 0u);
}

TEST_F(cli, fg_of_a_job_that_bg_left_running_gives_the_command_the_terminal) {
  // Ctrl-Z, `bg`, then `fg` while CMD still runs: bash gives the terminal to the job's group,
  // which is sqllock's (CMD runs in a group of its own), and sends no SIGCONT to a running job.
  // When CMD then reads the terminal, the kernel stops it (SIGTTIN); sqllock, in the foreground,
  // gives CMD the terminal and continues it. It used to stop the whole job instead ("Stopped"),
  // so that a job brought back with fg could never read its terminal.
  write_file("cmd.sh", reading_cmd_sh(path("pid"), path("go"), path("got")));
  terminal_session term;
  bg_job job;
  ASSERT_NO_FATAL_FAILURE(start_then_bg(term, url_, path("cmd.sh"), path("pid"), job));
  ASSERT_NO_FATAL_FAILURE(fg_of_the_running_job(term, job));
  const std::size_t after_fg = term.drained().size();  // what the terminal showed up to fg
  write_file("go", "");  // CMD reads the terminal now
  ASSERT_NO_FATAL_FAILURE(command_reads_hello_then_exits(term, job, path("got")));
  EXPECT_EQ(term.screen().find("Stopped", after_fg), std::string::npos) << "the job stopped after fg: " << term.screen();
  EXPECT_EQ(status_json().items.size(), 0u);
}

TEST_F(cli, ctrl_z_after_fg_of_a_job_that_bg_left_running_stops_the_command_too) {
  // Ctrl-Z, `bg`, `fg` while CMD still runs and has not touched the terminal since: the terminal is
  // sqllock's group's, so the next Ctrl-Z reaches sqllock, not CMD. It used to stop sqllock alone:
  // the shell said "Stopped" while CMD went on running. sqllock now passes the stop on to CMD and
  // stops with it; `fg` then resumes both, and CMD reads its terminal.
  write_file("cmd.sh", reading_cmd_sh(path("pid"), path("go"), path("got")));
  terminal_session term;
  bg_job job;
  ASSERT_NO_FATAL_FAILURE(start_then_bg(term, url_, path("cmd.sh"), path("pid"), job));
  const pid_t cmd = job.cmd, run = job.run;
  ASSERT_NO_FATAL_FAILURE(fg_of_the_running_job(term, job));
  const std::size_t after_fg = term.drained().size();
  term.type("\x1a");
  ASSERT_TRUE(wait_until([&] { return state_and_parent(run).first == 'T'; }))
      << "Ctrl-Z stops sqllock: " << process_report(cmd) << term.drained();
  EXPECT_TRUE(wait_until([&] { return process_group_stopped(cmd); }))
      << "Ctrl-Z stopped sqllock but CMD runs on: " << process_report(cmd) << term.drained();
  EXPECT_TRUE(term.wait_for("Stopped")) << term.drained();
  EXPECT_NE(term.screen().find("Stopped", after_fg), std::string::npos) << "the shell saw the job stopped: " << term.screen();
  EXPECT_EQ(status_json().items.size(), 1u) << "the lock stays held while the job is stopped";
  term.type("fg\n");
  ASSERT_TRUE(wait_until([&] { return !process_group_stopped(cmd) && state_and_parent(run).first != 'T'; }))
      << "fg continues sqllock and CMD: " << process_report(cmd) << term.drained();
  write_file("go", "");  // CMD reads the terminal now
  ASSERT_NO_FATAL_FAILURE(command_reads_hello_then_exits(term, job, path("got")));
  EXPECT_EQ(status_json().items.size(), 0u);
}

TEST_F(cli, a_job_continued_with_bg_whose_command_writes_to_the_terminal_with_tostop_stops) {
  // As above, with a CMD that writes to the terminal under `stty tostop` (set by the shell: bash
  // restores its own terminal settings when a job stops): in the background the kernel stops it
  // (SIGTTOU), and sqllock must stop with it, so the shell sees its job stopped; `fg` then lets
  // CMD write.
  write_file("cmd.sh", "echo $$ > " + path("pid") + "\nwhile [ ! -e " + path("go") +
                           " ]; do sleep 0.05; done\necho written-by-cmd\necho done > " + path("got") + "\nexit 3\n");
  terminal_session term;
  ASSERT_TRUE(term.started() && term.wait_for("$ ")) << term.drained();
  term.type("stty tostop\n");
  bg_job job;
  ASSERT_NO_FATAL_FAILURE(start_then_bg(term, url_, path("cmd.sh"), path("pid"), job));
  const pid_t cmd = job.cmd, run = job.run;
  const pid_t shell = term.shell_pid();
  write_file("go", "");  // CMD writes to the terminal now, in the background
  ASSERT_TRUE(wait_until([&] { return process_group_stopped(cmd) && state_and_parent(run).first == 'T'; }))
      << "CMD stopped by SIGTTOU, and sqllock with it: " << process_report(cmd) << term.drained();
  EXPECT_EQ(terminal_foreground_of(shell), shell) << process_report(cmd) << term.drained();
  EXPECT_FALSE(file_exists(path("got")));
  term.type("fg\n");
  ASSERT_TRUE(wait_for_file(path("got"))) << "CMD could not write: " << process_report(cmd) << term.drained();
  term.type("echo rc=$?.\n");
  EXPECT_TRUE(term.wait_for("rc=3.")) << term.screen();
  EXPECT_NE(term.screen().find("written-by-cmd"), std::string::npos) << term.screen();
  EXPECT_EQ(status_json().items.size(), 0u);
}

TEST_F(cli, ctrl_z_while_the_command_ends_for_a_lost_lease_leaves_it_its_grace) {
  // After bg + fg (sqllock's group has the terminal), the lease is lost: sqllock sends CMD SIGTERM
  // and leaves it --grace to end. A Ctrl-Z then stops sqllock alone, as before Ctrl-Z was passed on:
  // passed on, it froze CMD in the middle of its cleanup, to be killed at the end of the grace.
  write_file("cmd.sh", "trap 'sleep 0.5; echo cleaned > " + path("cleaned") + "; exit 7' TERM\necho $$ > " +
                           path("pid") + "\nwhile :; do sleep 0.05; done\n");
  terminal_session term;
  bg_job job;
  ASSERT_NO_FATAL_FAILURE(start_then_bg(term, url_, path("cmd.sh"), path("pid"), job, " --ttl 2s --grace 6s"));
  ASSERT_NO_FATAL_FAILURE(fg_of_the_running_job(term, job));
  EXPECT_EQ(sqllock({"release", "--url", url_, "--name", "tty", "--force"}).exit_code, 0);
  ASSERT_TRUE(term.wait_for("was lost")) << term.drained();  // CMD has its SIGTERM
  term.type("\x1a");
  EXPECT_TRUE(wait_for_file(path("cleaned"), 4s))
      << "CMD was stopped in its cleanup: " << process_report(job.cmd) << term.drained();
  EXPECT_TRUE(term.wait_for("Stopped")) << "Ctrl-Z did not stop sqllock: " << term.drained();
  term.type("fg\n");
  term.type("echo rc=$?.\n");
  EXPECT_TRUE(term.wait_for("rc=76.")) << "the lost lease's exit code: " << term.screen();
}

}  // namespace
