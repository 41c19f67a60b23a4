"""Templated training prompts: word problems, coding requests and chat, reproducible from a seed.

No prompt is taken from an evaluation set (GSM8K test, HumanEval, MT-Bench, Spec-Bench, MBPP, ...): every prompt is
assembled from the templates and word lists below with random names and numbers, and the tests check the result
against those sets for shared long n-grams.

Example::

    prompts = training_prompts(3, seed=0, mix={"math": 1, "code": 1, "chat": 1})
    # ['Maya buys 7 boxes of pencils ...', 'Write a Python function `count_vowels` that ...', 'Explain ...']
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from specframe_smollm2.training.chat_prompts import instruct_prompt, multi_prompt
from specframe_smollm2.training.data_config import DataConfig
from specframe_smollm2.training.math_prompts import word_problem
from specframe_smollm2.training.prompt_files import Prompt, PromptFile, decontaminate, file_prompts
from specframe_smollm2.training.prompt_stubs import stub_prompt
from specframe_smollm2.training.self_chat import self_chat_prompt

NAMES = ["Maya", "Liam", "Aisha", "Tom", "Sofia", "Kenji", "Priya", "Lucas", "Emma", "Omar", "Chloe", "Diego",
         "Hana", "Noah", "Zara", "Ivan", "Leila", "Marco", "Nina", "Felix", "Grace", "Ravi", "Elena", "Sam",
         "Yusuf", "Ines", "Hugo", "Mei", "Oscar", "Lena", "Tariq", "Rosa", "Ben", "Asha", "Pablo", "Julia"]
ITEMS = [("apple", "apples"), ("pencil", "pencils"), ("sticker", "stickers"), ("book", "books"),
         ("cupcake", "cupcakes"), ("marble", "marbles"), ("notebook", "notebooks"), ("flower", "flowers"),
         ("cookie", "cookies"), ("toy car", "toy cars"), ("shell", "shells"), ("candle", "candles"),
         ("orange", "oranges"), ("card", "cards"), ("bead", "beads"), ("egg", "eggs")]
CONTAINERS = ["box", "bag", "basket", "crate", "jar", "pack", "tray", "carton"]
JOBS = ["walking dogs", "tutoring", "mowing lawns", "babysitting", "selling lemonade", "washing cars",
        "delivering newspapers", "painting fences"]
PLACES = ["the park", "the library", "the market", "school", "the beach", "the museum", "the zoo", "the farm"]


def _math_prompt(rng: random.Random) -> str:
    a, b = rng.sample(NAMES, 2)
    item, items = rng.choice(ITEMS)
    box = rng.choice(CONTAINERS)
    n1, n2, n3 = rng.randint(2, 15), rng.randint(2, 30), rng.randint(2, 12)
    price = rng.choice([1.5, 2, 2.5, 3, 4, 5, 6, 7.5, 8, 12])
    templates: list[Callable[[], str]] = [
        lambda: f"{a} buys {n1} {box}es of {items}. Each {box} holds {n2} {items}. {a} gives {n3} {items} to "
                f"{b}. How many {items} does {a} have left?",
        lambda: f"A {item} costs ${price}. {a} buys {n1} {items} and pays with a ${n1 * price + n2:.0f} bill. "
                f"How much change does {a} get?",
        lambda: f"{a} earns ${n2} per hour {rng.choice(JOBS)}. Last week {a} worked {n1} hours on weekdays and "
                f"{n3} hours on the weekend. How much did {a} earn in total?",
        lambda: f"{a} is {n2} years old. {b} is {n3} years older than {a}. In {n1} years, what will be the sum "
                f"of their ages?",
        lambda: f"A train travels at {n2 * 5} km per hour for {n1} hours and then at {n3 * 10} km per hour for "
                f"{rng.randint(1, 5)} more hours. How far does it travel altogether?",
        lambda: f"{a} has {n1 * n3} {items} and wants to share them equally among {n3} friends. After sharing, "
                f"each friend gives {rng.randint(1, n1)} back. How many {items} does each friend keep?",
        lambda: f"There are {n2 + 20} students in a class. {rng.choice([20, 25, 40, 50, 60, 75])}% of them walk "
                f"to {rng.choice(PLACES)} on Fridays. How many students do not walk there?",
        lambda: f"A rectangular garden is {n2} meters long and {n3 + 2} meters wide. {a} wants to put a fence "
                f"around it. Fencing costs ${price} per meter. How much will the fence cost?",
        lambda: f"{a} reads {n3 + 5} pages of a book every day. The book has {(n3 + 5) * n2 + n1} pages. How many "
                f"days does {a} need to finish it, and how many pages are read on the last day?",
        lambda: f"{a} baked {n1 * 12} {items} for a fair. {a} sold {n2} in the morning and half of the rest in "
                f"the afternoon. How many {items} were left at the end of the day?",
        lambda: f"{a} saves ${n2} every week. {b} saves ${n3} every week but already has ${n1 * 10}. After how "
                f"many weeks will {a} have saved more than {b}?",
        lambda: f"A recipe needs {n3} cups of flour for {n1} {items}. How many cups of flour are needed for "
                f"{n1 * rng.randint(2, 6)} {items}?",
        lambda: f"{a} collected {n2} {items} on Monday, twice as many on Tuesday, and {n3} fewer on Wednesday "
                f"than on Tuesday. How many {items} did {a} collect in the three days?",
        lambda: f"The price of a {item} went up from ${n2} to ${n2 + n3}. By what percentage did the price "
                f"increase? Round to one decimal place.",
        lambda: f"{a} and {b} are painting a wall. {a} can paint it alone in {n1 + 1} hours and {b} in "
                f"{n3 + 2} hours. How long will it take them working together?",
    ]
    text = rng.choice(templates)()
    suffix = rng.choice(["", " Explain your reasoning step by step.", " Show your work.",
                         " Please reason step by step, and put your final answer within \\boxed{}."])
    return text + suffix


CODE_TASKS = [
    "returns the number of vowels in a string", "reverses the words in a sentence",
    "checks whether a string is a palindrome, ignoring case and spaces", "returns the n-th Fibonacci number",
    "returns the largest element of a list of integers", "removes duplicate values from a list while keeping order",
    "counts how many times each word appears in a text", "merges two sorted lists into one sorted list",
    "returns True if a number is prime", "computes the factorial of n iteratively",
    "converts a temperature from Celsius to Fahrenheit", "flattens a nested list of integers",
    "finds the second smallest number in a list", "returns the sum of the digits of an integer",
    "checks whether two strings are anagrams", "rotates a list to the right by k positions",
    "computes the greatest common divisor of two integers", "returns all even numbers from a list",
    "capitalizes the first letter of every word in a string", "counts the lines in a text file",
    "returns the median of a list of numbers", "converts a binary string to an integer",
    "finds the longest word in a sentence", "computes the average of a list, returning 0 for an empty list",
    "checks whether brackets in a string are balanced", "returns the intersection of two lists",
    "computes the running total of a list of numbers", "groups a list of words by their first letter",
    "returns the index of a target value using binary search", "transposes a matrix given as a list of lists",
    "counts the number of uppercase letters in a string", "returns the n smallest elements of a list",
    "checks whether a year is a leap year", "splits a list into chunks of size k",
    "compresses a string with run-length encoding", "returns the most frequent element of a list",
    "computes the dot product of two vectors", "validates that a string looks like an email address",
    "sorts a list of tuples by their second element", "returns the power set of a small list",
]
LANGUAGES = ["Python", "Python", "Python", "JavaScript", "C", "Java", "Go", "Rust", "TypeScript", "C++"]
SNIPPETS = [
    "def f(xs):\n    out = []\n    for x in xs:\n        if x % 2:\n            out.append(x * x)\n    return out",
    "def g(s):\n    return ''.join(c for c in s if c.isalnum()).lower()",
    "def h(n):\n    total = 0\n    while n:\n        total += n % 10\n        n //= 10\n    return total",
    "def k(d):\n    return sorted(d.items(), key=lambda kv: kv[1], reverse=True)[:3]",
    "def avg(nums):\n    return sum(nums) / len(nums)",
    "def last(xs):\n    return xs[len(xs)]",
    "def count(words):\n    seen = {}\n    for w in words:\n        seen[w] = seen.get(w, 0) + 1\n    return seen",
]


def _snake(task: str, rng: random.Random) -> str:
    words = [w.strip(",.") for w in task.split() if w.isalpha() and len(w) > 3][:3]
    return "_".join(words) if words and rng.random() < 0.5 else rng.choice(
        ["solve", "process", "compute", "helper", "transform", "check_value", "run_task"])


def _code_prompt(rng: random.Random) -> str:
    task = rng.choice(CODE_TASKS)
    lang = rng.choice(LANGUAGES)
    name = _snake(task, rng)
    kind = rng.random()
    if kind < 0.55:
        extra = rng.choice(["", " Include a short docstring.", " Add a few example calls.",
                            " Keep it short.", " Explain the time complexity.", " Add type hints."])
        return f"Write a {lang} function `{name}` that {task}.{extra}"
    if kind < 0.7:
        return f"How would I write code in {lang} that {task}? Show an example."
    if kind < 0.85:
        snippet = rng.choice(SNIPPETS)
        ask = rng.choice(["Explain what this Python code does", "Is there a bug in this code? Fix it if so",
                          "Rewrite this code to be more readable", "Add comments to this code"])
        return f"{ask}:\n```python\n{snippet}\n```"
    return f"Write unit tests in {lang} for a function that {task}."


TOPICS = ["photosynthesis", "black holes", "the water cycle", "inflation", "machine learning", "vaccines",
          "the French Revolution", "plate tectonics", "recursion", "compound interest", "climate change",
          "the immune system", "blockchains", "the stock market", "gravity", "volcanoes", "DNA", "electricity",
          "the internet", "sleep", "rainbows", "earthquakes", "supply and demand", "the moon's phases",
          "renewable energy", "bees and pollination", "the Roman Empire", "solar panels", "memory in the brain",
          "operating systems", "encryption", "the ocean tides", "coffee", "jazz music", "the Olympic Games"]
AUDIENCES = ["to a ten-year-old", "in simple terms", "in one paragraph", "to a high-school student",
             "with an everyday analogy", "in three bullet points", "briefly", "as if I were a beginner"]
ACTIVITIES = ["studying for exams", "learning to cook", "staying focused while working from home", "running a 5k",
              "saving money", "learning a new language", "sleeping better", "starting a garden",
              "giving a presentation", "keeping a journal", "planning a trip", "making new friends"]
FORMS = ["short poem", "haiku", "short story", "limerick", "product description", "thank-you note",
         "motivational message", "two-sentence horror story", "short speech"]


def _chat_prompt(rng: random.Random) -> str:
    topic, other = rng.sample(TOPICS, 2)
    kind = rng.randrange(7)
    if kind == 0:
        return f"Explain {topic} {rng.choice(AUDIENCES)}."
    if kind == 1:
        return f"Give me {rng.randint(3, 7)} tips for {rng.choice(ACTIVITIES)}."
    if kind == 2:
        return f"Write a {rng.choice(FORMS)} about {topic}."
    if kind == 3:
        return f"What is the difference between {topic} and {other}?"
    if kind == 4:
        return f"What are the main advantages and disadvantages of {topic}?"
    if kind == 5:
        return f"{rng.choice(NAMES)} asks: why is {topic} important? Answer {rng.choice(AUDIENCES)}."
    return f"List {rng.randint(3, 6)} interesting facts about {topic}."


#: Prompt kinds by name; ``multi`` gives a conversation (a tuple of user turns), the others one turn.
GENERATORS: dict[str, Callable[[random.Random], Prompt]] = {
    "math": _math_prompt, "code": _code_prompt, "stub": stub_prompt, "chat": _chat_prompt,
    "word_problem": word_problem, "instruct": instruct_prompt, "multi": multi_prompt,
    "self_chat": self_chat_prompt,
}


def training_prompts(count: int, *, seed: int, mix: Mapping[str, float]) -> list[Prompt]:
    """``count`` distinct prompts drawn with ``random.Random(seed)``; ``mix`` weights the kinds."""
    return list(_draw(count, seed=seed, mix=mix))


def _draw(count: int, *, seed: int, mix: Mapping[str, float]) -> dict[Prompt, str]:
    """``count`` distinct prompts in drawing order, each mapped to the kind (``GENERATORS`` key) that wrote it."""
    rng = random.Random(seed)
    kinds = [k for k in GENERATORS if mix.get(k, 0) > 0]
    weights = [float(mix[k]) for k in kinds]
    out: dict[Prompt, str] = {}
    attempts = 0
    while len(out) < count and attempts < count * 50:
        attempts += 1
        kind = rng.choices(kinds, weights)[0]
        prompt = GENERATORS[kind](rng)
        out.setdefault(prompt, kind)
    return out


def recipe_prompts(count: int, *, seed: int, mix: Mapping[str, float], files: Sequence[PromptFile] = (),
                   exclude: Sequence[PromptFile] = (), exclude_ngram: int = 10) -> list[Prompt]:
    """``count`` templated prompts plus every prompt of ``files``, decontaminated against ``exclude`` and shuffled
    together with ``seed``.

    Without files or exclusions this is :func:`training_prompts` unchanged (so existing data stays valid).
    """
    prompts = training_prompts(count, seed=seed, mix=mix)
    if not files and not exclude:
        return prompts
    seen = set(prompts)
    for source in files:
        for p in file_prompts(source):
            if p not in seen:
                seen.add(p)
                prompts.append(p)
    prompts = decontaminate(prompts, exclude, exclude_ngram)
    random.Random(seed + 1).shuffle(prompts)
    return prompts


def section_prompts(data: DataConfig) -> list[Prompt]:
    """The prompts of a recipe's data section, in generation order."""
    return recipe_prompts(data.num_prompts, seed=data.seed, mix=data.mix, files=data.prompt_files,
                          exclude=data.decontaminate, exclude_ngram=data.decontaminate_ngram)


def section_prompt_kinds(data: DataConfig) -> list[str]:
    """The kind of each prompt of :func:`section_prompts` (same order): a ``GENERATORS`` key for a templated
    prompt, ``file:<name>`` for one read from a prompt file."""
    kinds = _draw(data.num_prompts, seed=data.seed, mix=data.mix)
    for source in data.prompt_files:
        for p in file_prompts(source):
            kinds.setdefault(p, f"file:{Path(source.path).stem}")
    return [kinds[p] for p in section_prompts(data)]
