"""The lesson registry: every lesson's number, title, icon, goal, "Predict first" question and page.

One place for what the navigation (app.py), Home's lesson map and each lesson page's header
(bsdemo.ui.header) say about a lesson, so the three cannot disagree. Pure Python.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lesson:
    number: int
    title: str  # the navigation's label, the page's title and Home's heading alike
    goal: str  # one line: Home's map and the navigation's tooltip
    slug: str | None = None  # the page's URL path; None while the lesson is coming
    icon: str = ":material/school:"
    intro: str = ""  # the page's **Goal:** paragraph (Markdown)
    predict: str = ""  # the page's "Predict first" question (Markdown)
    answers: tuple[str, ...] = ()  # choices for its first part, judged by the student's runs

    @property
    def page(self) -> str | None:
        """The page file under pages/, once built."""
        return f"pages/{self.slug}.py" if self.slug else None


LESSONS = (
    Lesson(1, "Training Lab", "What a batch is: one iteration = batch, forward, loss, backward, "
           "step; updates per epoch = ceil(N / batch).", "training_lab",
           ":material/model_training:",
           "see what one training *iteration* is — take a batch, run it forward, compute the "
           "loss, run backward, take an optimizer step — and how the batch size sets how many of "
           "them an epoch takes. Batch size 1 is stochastic gradient descent, the whole training "
           "set is full-batch gradient descent, anything between is mini-batch gradient descent.",
           "if you multiply the batch size by 8, what happens to the number of updates per "
           "epoch, to the samples per second, and to the memory? Run both and compare.",
           ("8× as many updates per epoch", "the same number", "about 8× fewer")),
    Lesson(2, "Throughput and utilisation", "Samples/s rises with batch size until the device "
           "saturates: t(B) = t0 + t1·B.", "throughput", ":material/speed:",
           "see that a small batch leaves the device idle and pays a fixed cost per step many "
           "times, and that samples per second rise with the batch — until the hardware "
           "saturates, where your sweep reaches that point (the page says whether it did).",
           "if a step at batch 1 takes 0.5 ms, how long will a step at batch 64 take — 64 times "
           "as long, or about the same?",
           ("about 64 times as long", "about the same", "longer, but far less than 64 times")),
    Lesson(3, "Memory and out-of-memory", "Memory = fixed part + activations growing with B; "
           "past capacity the run fails.", "memory", ":material/memory:",
           "see that memory = parameters + gradients + optimizer state (fixed) + the activations "
           "saved for the backward pass (growing with the batch), and that past the device's "
           "capacity a run fails with out-of-memory — one of the most common errors there is.",
           "the sweep doubles the batch from one point to the next: at its largest batches, "
           "what does doubling the batch do to peak memory? And if batch 256 needs 3 MiB and "
           "batch 512 needs 5 MiB, what will batch 1024 need, and what fits in 8 MiB?",
           ("it doubles too", "it grows, but by less than double", "it stays about the same")),
    Lesson(4, "SGD, full batch, mini-batch", "Three regimes on one model: updates, time, memory, "
           "accuracy.", "regimes", ":material/compare:",
           "compare batch size 1 (stochastic gradient descent), the whole training set "
           "(full-batch gradient descent) and a mini-batch of 32 on the same model, data, seed "
           "and number of epochs: weight updates, wall time, memory and accuracy.",
           "with the same 5 epochs, which regime makes the most weight updates, which finishes "
           "first, and which ends with the best test accuracy?",
           ("the SGD run (the smallest batch) does", "the full batch does",
            "the mini-batch does")),
    Lesson(5, "Learning-rate scaling", "Scale the lr with the batch: what the linear and √ "
           "rules win back, and what warm-up changed.", "lr_scaling", ":material/trending_up:",
           "see that multiplying the batch by k without touching the learning rate trains worse "
           "per epoch, and how much of that the linear rule (lr × k) and the square-root rule "
           "(lr × √k) win back. A warm-up ramps the learning rate up over its first epochs: at "
           "these defaults nothing blows up without it, and the Warm-up preset (Adam, k = 32, "
           "5 epochs of warm-up) shows a loss spike and how much the ramp cuts it — and whether "
           "the √ rule, with no warm-up at all, did better still.",
           "at 8× the batch and the same lr, will 10 epochs reach the same accuracy? What if the "
           "lr is 8× too?",
           ("about the same accuracy", "clearly worse (more than a point)",
            "clearly better")),
    Lesson(6, "Gradient accumulation", "k micro-batches of b = one batch of k·b, at the memory "
           "of b.", "accumulation", ":material/layers:",
           "see that k micro-batches of size b, gradients summed with the loss divided by k and "
           "one optimizer step, equal one step with a batch of k·b — the same gradients up to "
           "float32 rounding — while memory stays at the micro-batch's level.",
           "does accumulating 4 micro-batches of 32 train faster than one batch of 128? Does it "
           "need less memory?",
           ("faster", "about as fast (within 10%)", "slower")),
    Lesson(7, "Generalisation gap and sharpness", "Small and large batch to the same training "
           "loss: how sharp each minimum is, and whether it tests worse.", "sharpness",
           ":material/landscape:",
           "train a small batch and the full batch from one start, with one learning rate, to "
           "the same training loss, and measure how sharp each minimum is — the Hessian's top "
           "eigenvalue, the loss a small random step away, the loss between the two — and "
           "whether the sharper one tests worse. Large batches are often reported to generalise "
           "worse (Keskar et al. 2017); here you see what your own runs show, and what the "
           "remedies (scaling the lr, warm-up, longer training, added noise) do.",
           "trained with the same lr to the same training loss, whose minimum will be sharper "
           "(the larger top Hessian eigenvalue): batch 16's or the full batch's?",
           ("the small batch's", "the large batch's", "about the same (within 20%)")),
    Lesson(8, "Gradient noise", "Gradient variance falls as 1/B; the noise scale predicts the "
           "critical batch.", "noise", ":material/grain:",
           "measure how noisy a mini-batch gradient is on your model: its variance against the "
           "batch, how well it points along the full gradient, and the simple noise scale "
           "B_simple — the batch at which noise and signal are the same size, and past which a "
           "bigger batch buys ever fewer steps.",
           "if the batch is 4× larger, what happens to the variance of its gradient?",
           ("about 4× smaller", "about 2× smaller", "about the same")),
    Lesson(9, "Normalisation layers", "BatchNorm depends on the batch; GroupNorm and LayerNorm "
           "do not.", "norms", ":material/tune:",
           "see that BatchNorm normalises each feature with the mean and variance of the batch it "
           "is in — a noisy estimate at batch 2 — while GroupNorm and LayerNorm normalise each "
           "sample on its own, and what that does to accuracy, to evaluation, and to a sample "
           "whose batch-mates change.",
           "at batch 2, which normalisation reaches the lowest test accuracy after the same "
           "epochs? And at evaluation, can a sample's prediction change when only its "
           "batch-mates do?",
           ("BatchNorm", "another one (none, GroupNorm or LayerNorm)",
            "none of them: all within 3 points")),
    Lesson(10, "Fitting a bigger batch", "Mixed precision, checkpointing and accumulation under "
           "one memory budget, measured.", "fit_batch", ":material/compress:",
           "measure, under one memory budget, how large a batch each technique lets a training "
           "step fit and how fast it then runs: plain fp32, mixed precision (autocast to bf16; "
           "fp16 with a gradient scaler on a GPU), gradient checkpointing, both, and gradient "
           "accumulation — and check that none of them changed the result.",
           "under the same memory budget, which fits the largest single batch: mixed precision "
           "(bf16), gradient checkpointing, or both together?",
           ("bf16 autocast", "gradient checkpointing", "both together")),
    Lesson(11, "Choosing a batch size", "Start at 32, grow while throughput rises and memory "
           "allows; each architecture's range, measured here.", "finder", ":material/search:",
           "choose a batch size the way practitioners do — as large as throughput rewards and "
           "memory allows — measured on this device, never guessed; then see where a CNN, a "
           "Transformer, an LSTM and a GAN land on this machine against the rules of thumb "
           "(CNNs 32–256, Transformers into the thousands, RNNs 16–64, GANs 32–128).",
           "how many trial runs does it take to find the largest batch that fits, if you double "
           "the batch from 1 until it fails?",
           ("1 to 3", "4 to 8", "9 or more")),
    Lesson(12, "Check yourself", "A quiz across the lessons, explained with your own runs' "
           "numbers.", "quiz", ":material/quiz:",
           "check what the lessons showed. Each answer is explained once you have given it, and "
           "where you ran the matching experiment in the Training Lab, the explanation quotes "
           "your own numbers. Your answers come back when this browser reloads the page, until "
           "the server restarts; nothing is written to disk."),
)
BY_SLUG = {lesson.slug: lesson for lesson in LESSONS if lesson.slug}
