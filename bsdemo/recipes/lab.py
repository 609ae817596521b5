"""The Training Lab's closing text, from the session's own runs."""

from __future__ import annotations

from collections.abc import Sequence

from bsdemo.recipes.chance import at_chance, chance_words
from bsdemo.recipes.closing import join
from bsdemo.runs import JobSnapshot, comparable_rates, stable_rate, turns_note
from bsdemo.units import fixed, percent, setting, sig

ENDED = {
    "completed": "",
    "time_cap": " It hit its time cap before its budget was done.",
    "cancelled": " It was stopped before its budget was done.",
    "diverged": " Its loss diverged: the learning rate was too large for it.",
    "oom": " It ran out of memory.",
}


def lab_verdict(runs: Sequence[JobSnapshot]) -> str | None:
    """What the session's finished training runs show, from their own numbers: the newest, and
    the smallest against the largest effective batch when they trained alike (same epochs, same
    lr, both completed). None before any run has ended."""
    done = [s for s in runs if s.done and s.kind == "train" and s.summary.get("steps")]
    if not done:
        return None
    new = done[-1]
    s, b = new.summary, new.effective_batch
    acc = s.get("test_accuracy")
    rate = stable_rate(s)
    # a GAN: how real its images looked, against what real digits score
    reached = (
        f" Real training digits score {sig(s['frechet_reference'], 2)} against the test digits."
        if s.get("frechet_distance") is not None
        else ""
    )
    short = (
        f" and reached a Fréchet distance of {sig(s['frechet_distance'])}"
        if s.get("frechet_distance") is not None
        else f" and reached {percent(acc)} test accuracy"
        if acc is not None
        else ""
    )
    if at_chance(acc, s):  # said wherever the accuracy is shown (the why: in the text)
        short = f" and ended at chance ({percent(acc)} test accuracy)"
        reached += f" It ended {chance_words(acc, s)}."
    lead = f"Run #{new.run_number} at batch {b} made {s['steps']:,} optimizer steps{short}."
    text = (
        f"It trained {setting(s.get('epochs', 0), 3)} epochs in {fixed(s.get('wall_time_s', 0), 2)} s"
        + (f", a median {fixed(rate, 0)} samples/s" if rate else "")
        + "."
        + reached
        + ENDED.get(new.ending, f" It {new.status}.")
    )
    if new.shared_device:
        text += " Another run shared the device meanwhile, so its speed was shared too."
    if new.turns_with:
        text += " " + turns_note(new.turns_with, done=True)
    alike = [
        r
        for r in done
        if r.status == "completed"
        and r.ending != "time_cap"
        and r.config["epochs"] == new.config["epochs"]
        and r.config["lr"] == new.config["lr"]
        and r.config["model"] == new.config["model"]
    ]
    small = min(alike, key=lambda r: r.effective_batch, default=None)
    large = max(alike, key=lambda r: r.effective_batch, default=None)
    if small is None or small.effective_batch == large.effective_batch:
        return join(lead, text + " Run it again at another batch size (same epochs and lr) to compare.")
    ss, ls = small.summary, large.summary
    ks, kl = small.effective_batch, large.effective_batch
    rates = comparable_rates(ss, ls)
    accuracies = (
        ss.get("frechet_distance") is None
        and ls.get("frechet_distance") is None
        and ss.get("test_accuracy") is not None
        and ls.get("test_accuracy") is not None
    )
    # the headline names what the student came for: updates, speed and what they learned
    lead = (
        f"Batch {kl}: {ls['steps'] / ls['epochs']:.0f} updates an epoch against batch "
        f"{ks}'s {ss['steps'] / ss['epochs']:.0f}"
        + (f", {fixed(rates[1] / rates[0], 1)}× the samples per second" if rates else "")
        + (
            f", test accuracy {percent(ss['test_accuracy'])} → {percent(ls['test_accuracy'])}"
            if accuracies
            else ""
        )
        + "."
    )
    text = f"Run #{new.run_number} at batch {b}: " + text[:1].lower() + text[1:]
    if rates is not None:
        text += f" The two runs' samples per second are compared by {rates[2]}."
    if rates is None and ss.get("samples_per_sec") and ls.get("samples_per_sec"):
        text += (
            " Their speeds are not compared: they were measured under different conditions "
            "(another load on this machine, another device or thread count); run both "
            "again now to compare them."
        )
    if ss.get("frechet_distance") is not None and ls.get("frechet_distance") is not None:
        text += (
            f" Its images reached a Fréchet distance of {sig(ls['frechet_distance'])} "
            f"against {sig(ss['frechet_distance'])} (lower is more like real digits)."
        )
    elif accuracies:
        # in points, from the accuracies as shown (one decimal): the words follow the figures
        gap = round(round(ss["test_accuracy"] * 100, 1) - round(ls["test_accuracy"] * 100, 1), 1)
        for name, run in ((f"Batch {ks}", ss), (f"Batch {kl}", ls)):
            if at_chance(run["test_accuracy"], run):
                text += f" {name} ended {chance_words(run['test_accuracy'], run)}."
        if gap > 2:
            text += (
                f" After the same epochs and learning rate batch {kl} reached "
                f"{percent(ls['test_accuracy'])} against {percent(ss['test_accuracy'])}: fewer "
                "updates of the same size learn less per epoch — raise the learning rate "
                "with the batch (Learning-rate scaling) or train longer."
            )
        elif gap < -2:
            text += (
                f" Batch {kl} also reached a better test accuracy "
                f"({percent(ls['test_accuracy'])} against {percent(ss['test_accuracy'])}): the small "
                "batch's noisy updates cost it more than the lost updates cost the large "
                "one here."
            )
        else:
            text += (
                f" Both reached about the same test accuracy ({percent(ls['test_accuracy'])} "
                f"and {percent(ss['test_accuracy'])}: within 2 points)."
            )
    if ss.get("peak_memory_bytes") and ls.get("peak_memory_bytes"):
        text += (
            f" Its peak memory was {fixed(ls['peak_memory_bytes'] / ss['peak_memory_bytes'], 1)}× "
            f"as much ({ls.get('memory_source', 'measured')})."
        )
    return join(lead, text)
