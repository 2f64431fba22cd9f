"""A paste of the launcher's last lines alone: its report of how ranks ended and its reaction. Which rank
failed first and how it ended, never why: the cause is printed above them (the last verdict reader)."""

from __future__ import annotations

import re

from jobs import wording
from jobs.diagnosis import RootCause, clip, ranks_text
from jobs.events import SIGNALS, Exit, first_failure
from jobs.timeline import JobTimeline
from jobs.verdict import Verdict

SLURM_REASON = re.compile(r"CANCELLED AT \S+ DUE (?:TO|to) (?P<reason>[A-Z][A-Z ]{2,60}?|SIGNAL \w+)(?: \*| ,|,|$)")
# (English, Chinese) of what an exit code or a signal says, where it says something.
CODE_MEANS = {
    1: ("an error of its own: Python exits with 1 on an uncaught exception (or sys.exit(1))",
        "它自己的错误：Python 在未捕获的异常（或 sys.exit(1)）时以 1 退出"),
    2: ("Python exits with 2 when argparse rejects the command line or the script cannot be opened",
        "argparse 拒绝命令行或脚本文件打不开时，Python 以 2 退出"),
    -6: ("it aborted itself: NCCL's watchdog aborts a rank whose collective timed out or failed, C++ code aborts on an "
         "uncaught exception (`terminate called after throwing`) or a failed assertion",
         "它自己中止了：NCCL 的 watchdog 会中止集合通信超时或失败的 rank，C++ 代码在未捕获的异常"
         "（`terminate called after throwing`）或断言失败时中止"),
    -2: ("interrupted: Ctrl-C, or the terminal or launcher that ran it closed", "被中断：Ctrl-C，或运行它的终端/启动器关闭了"),
    -1: ("the terminal or session that ran it closed", "运行它的终端或会话关闭了"),
}
STOPPED = ("SIGTERM: the launcher stops the other ranks when one exits, and stops them all when it is itself told to "
           "stop (scancel, a time limit, preemption, Ctrl-C)",
           "SIGTERM：某个 rank 退出时启动器会停止其他 rank；启动器自己被要求停止（scancel、时间上限、抢占、Ctrl-C）时会停止所有 rank")
SLURM_REASONS = {
    "TIME LIMIT": ("the job reached its time limit (--time): it needs more time, or resume from a checkpoint; if it had "
                   "stopped printing long before, it hung and the time limit only ended it",
                   "作业到了时间上限（--time）：需要更多时间，或从检查点恢复；如果它早就不再输出，那是卡住了，时间上限只是结束了它"),
    "PREEMPTION": ("a job of higher priority preempted it: resubmit (--requeue) and resume from a checkpoint",
                   "被更高优先级的作业抢占：重新提交（--requeue）并从检查点恢复"),
    "NODE FAILURE": ("a node of the job failed: `sinfo -R` and the node's logs say why (hardware, a driver, the node "
                     "rebooting)", "作业的某个节点故障：`sinfo -R` 和该节点的日志会说明原因（硬件、驱动、节点重启）"),
}
LAUNCHER_HINTS = {  # what would tell more, per launcher whose lines the paste shows: (English, Chinese)
    "torchrun": ("torchrun --log-dir DIR --tee 3 keeps every rank's output apart; @record on the script's main() "
                 "(torch.distributed.elastic.multiprocessing.errors.record) puts its traceback into this failure summary",
                 "torchrun --log-dir DIR --tee 3 会把每个 rank 的输出分开保存；在脚本的 main() 上加 @record"
                 "（torch.distributed.elastic.multiprocessing.errors.record），它的 traceback 就会出现在这份失败汇总里"),
    "srun": ("srun --label (-l) prefixes every line with its task; `sacct -j JOBID -o JobID,State,ExitCode,MaxRSS,NodeList` "
             "says how each step and node ended",
             "srun --label（-l）会在每行前标出它的任务号；`sacct -j JOBID -o JobID,State,ExitCode,MaxRSS,NodeList` "
             "会说明每个作业步和节点是怎么结束的"),
    "deepspeed": ("the DeepSpeed launcher's `process PID spawned with command: [... --local_rank=N]` lines say which pid "
                  "was which local rank",
                  "DeepSpeed 启动器的 `process PID spawned with command: [... --local_rank=N]` 行说明了哪个 pid 是哪个本地 rank"),
}
SCHEDULER_HINT = ("the scheduler's record: `sacct -j JOBID -o JobID,State,ExitCode,Elapsed,Timelimit` (CANCELLED, TIMEOUT, "
                  "PREEMPTED, NODE_FAIL), or who ran scancel or kill",
                  "调度器的记录：`sacct -j JOBID -o JobID,State,ExitCode,Elapsed,Timelimit`（CANCELLED、TIMEOUT、PREEMPTED、"
                  "NODE_FAIL），或者是谁运行了 scancel 或 kill")
ABORT_HINT = ("that rank's lines before the abort: 'Watchdog caught collective operation timeout' means it waited for "
              "another rank (find that one), 'terminate called after throwing an instance of' names the C++ exception",
              "该 rank 中止之前的几行：'Watchdog caught collective operation timeout' 表示它在等另一个 rank（去找那个 rank），"
              "'terminate called after throwing an instance of' 写明了 C++ 异常")



def _who(x: Exit, group: list[Exit], single_node: bool) -> tuple[str, str, int | None]:
    """(English, Chinese) names of the rank(s) an exit report names, with the host, and the rank to blame: on one
    node a local rank is the global rank (as ``jobs.events`` reads torchrun's prefixes)."""
    ranks = sorted({g.rank for g in group if g.rank is not None})
    rank = ranks[0] if len(ranks) == 1 and len(group) == 1 else None
    task = x.launcher == "srun"
    if len(ranks) > 1:
        who = ranks_text(ranks).replace("ranks", "Slurm tasks", 1) if task else ranks_text(ranks)
        zh = wording.rank_names(ranks).replace("rank", "Slurm 任务", 1) if task else wording.rank_names(ranks)
    elif x.rank is not None:
        who, zh = (f"Slurm task {x.rank}", f"Slurm 任务 {x.rank}") if task else (f"rank {x.rank}", f"rank {x.rank}")
    elif x.local_rank is not None:
        who, zh = f"local rank {x.local_rank}", f"本地 rank {x.local_rank}"
        if single_node and len(group) == 1:
            who, zh, rank = f"{who} (rank {x.local_rank} on a single node)", f"{zh}（单节点时即 rank {x.local_rank}）", x.local_rank
    elif x.launcher == "deepspeed":  # its line quotes the last command it started, not the failed rank's
        who = "one of the DeepSpeed launcher's ranks (its return-code line quotes the last command it started, not the failed one's)"
        zh = "DeepSpeed 启动器的某个 rank（它报告返回码的那行引用的是它最后启动的命令，不是失败的那个）"
    else:
        who, zh = "the launched process", "被启动的进程"
    host = (f" on {x.host}", f"（{x.host}）") if x.host else ("", "")
    return who + host[0], zh + host[1], rank


def read(timeline: JobTimeline, question: str) -> Verdict | None:
    """The paste shows the launcher's lines alone: its report of how ranks ended (torchrun's table, srun's "task 3:
    Exited with exit code 1", DeepSpeed's return code) and its reaction (SIGTERM to the others, "Killing
    subprocess", Slurm cancelling the step). They say which rank failed first and how it ended, never why, and
    they are no timeout: the verdict names that rank and asks for what its process printed above them. The last
    reader: it reads whatever events are left."""
    job, events = timeline.job, timeline.events
    if not events:
        return None
    exits = [x for x in job.exits if x.code not in (None, 0)]
    first = first_failure(job.exits)
    lines = [e.line for e in events]
    markers = (("torchrun", "closing signal"), ("deepspeed", "Killing subprocess"), ("srun", "srun: "), ("srun", "slurmstepd"))
    launchers = {x.launcher for x in exits} | {name for name, marker in markers if any(marker in line for line in lines)}
    reason = next((m["reason"].strip() for line in lines if (m := SLURM_REASON.search(line))), None)
    rank = None
    host = None
    if first is not None:
        group = [first]
        if first.launcher == "srun" and not first.first:  # "tasks 0-3: Exited with exit code 1": reported together
            group = [x for x in exits if (x.launcher, x.code, x.host) == (first.launcher, first.code, first.host)]
        single_node = len({x.host for x in job.exits if x.host} | set(job.hosts.values())) <= 1
        who, who_zh, rank = _who(first, group, single_node)
        name = SIGNALS.get(-first.code, f"signal {-first.code}") if first.code is not None and first.code < 0 else ""
        how, how_zh = ((f"was ended by {name}", f"被 {name} 结束") if name else
                       (f"exited with code {first.code}", f"以退出码 {first.code} 退出"))
        means, means_zh = CODE_MEANS.get(first.code or 0, ("its own error, printed before it exited", "它自己的错误，退出前已打印"))
        observed = ", torchrun's first observed failure" if first.first else ""
        summary = f"{who} failed first{observed}: it {how} ({means})"
        chinese = f"{who_zh}最先失败{'（torchrun 的 first observed failure）' if first.first else ''}：{how_zh}（{means_zh}）"
        host = first.host
        category = "exception" if first.code == 1 else "unknown"
        named = first.rank is not None or first.local_rank is not None
        cause_in = f"{who.split(' (', 1)[0]}'s own output" if named else "the failed rank's own output"
        cause_in_zh = f"{who_zh.split('（', 1)[0]} 自己的输出" if named else "失败的那个 rank 自己的输出"
    else:
        stopped = sorted({x.rank for x in exits if x.rank is not None})
        who = ranks_text(stopped) if stopped else "the ranks"
        category = "unknown"
        if reason is not None:
            summary, chinese = "", ""
        elif exits:
            summary = f"{who} {'was' if len(stopped) == 1 else 'were'} stopped ({STOPPED[0]}), and these lines show no rank failing first"
            chinese = f"{wording.rank_names(stopped) if stopped else '这些 rank'}被停止（{STOPPED[1]}），这些行里没有哪个 rank 先失败"
        else:
            summary = f"the launcher stopped {who} ({STOPPED[0]})"
            chinese = f"启动器停止了{'这些 rank' if not stopped else wording.rank_names(stopped)}（{STOPPED[1]}）"
        cause_in, cause_in_zh = "the output of the rank that failed", "失败的那个 rank 的输出"
    if reason is not None:
        said, said_zh = SLURM_REASONS.get(reason, (f"Slurm says: {reason}", f"Slurm 的说明：{reason}"))
        summary += f"{'; ' if summary else ''}Slurm cancelled the job step DUE TO {reason}: {said}"
        chinese += f"{'；' if chinese else ''}Slurm 因 {reason} 取消了作业步：{said_zh}"
    if first is None and reason is not None:
        summary += (". These lines are Slurm's and the launcher's reaction, not a timeout of the job's own: what each rank "
                    "printed last, above them, says whether it was still making progress")
        chinese += "。这些行是 Slurm 和启动器的反应，不是作业自己的超时：各 rank 在这些行上方最后打印的内容能说明它当时是否还在推进"
        cause_in, cause_in_zh = "what each rank printed last", "各 rank 最后打印的内容"
    else:
        summary += (f". These lines are the launcher's report and its reaction, not a timeout and not the cause: the cause "
                    f"is in {cause_in}, printed above them")
        chinese += f"。这些行是启动器的报告和它的反应，不是超时，也不是原因：原因在 {cause_in_zh}里，打印在这些行的上方"
    if first is None and reason is not None:
        asked = ("what each rank printed last, just above these lines: steps still advancing means it only ran out of "
                 "time, output that stopped long before means it hung (`ask --log FILE` reads the whole log)",
                 "各 rank 在这些行上方最后打印的内容：步数还在推进，说明只是时间不够；输出早就停了，说明它卡住了"
                 "（`ask --log FILE` 会读取整个日志）")
    else:
        asked = (f"{cause_in} just above these lines: its traceback or error message (paste the 30-50 lines before the "
                 "launcher's first line, or give the whole log: `ask --log FILE` reads it all)",
                 f"{cause_in_zh}，就在这些行的上方：它的 traceback 或报错（贴出启动器第一行之前的 30-50 行，或者给出整个日志："
                 "`ask --log FILE` 会全部读取）")
    hints = [asked]
    if first is not None and first.code == -6:
        hints.append(ABORT_HINT)
    if reason is not None or (first is None and exits):
        hints.append(SCHEDULER_HINT)
    hints += [hint for name, hint in LAUNCHER_HINTS.items() if name in launchers]
    own = None if first is None else next((e for e in events if not e.source and e.rank == first.rank
                                           and e.line.startswith(f"exitcode {first.code} (")), None)
    evidence = list(dict.fromkeys(clip(line, 300) for line in lines))[:5]
    root = RootCause(category, rank, summary, host=host, evidence=evidence, confidence=0.5 if rank is not None else 0.3)
    # the first failure's own exit is no consequence of itself
    return Verdict(root, chinese, culprit=own, blamed=rank, next_evidence=hints, search_lines=evidence[:3])
