"""Templated function-stub prompts: a signature and a docstring with examples, to be completed by the target.

Code benchmarks in the speculative-decoding papers hand the model a *stub* (imports, a typed signature and a
docstring with ``>>>`` examples) inside an instruction (docs/concepts/benchmark-protocol.md). Free-form "write a
function that ..."
requests teach a drafter a different distribution, so this module builds stubs of the same shape from its own
task table, with random names, argument spellings, docstring styles and wrappers. Nothing comes from an
evaluation set; ``tests/test_prompts.py`` checks for shared long n-grams.

Example::

    rng = random.Random(0)
    print(stub_prompt(rng))
    # Write a solution to the following problem and make sure that it passes the tests:
    # ```python
    # from typing import List
    #
    #
    # def keep_even(values: List[int]) -> List[int]:
    #     \"\"\" Return only the even numbers of values, in their original order.
    #     >>> keep_even([1, 2, 3, 4])
    #     [2, 4]
    #     \"\"\"
    # ```
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class StubTask:
    names: tuple[str, ...]  # candidate function names
    params: str  # typed parameter list
    returns: str  # return annotation
    doc: str  # one-sentence description ({p} is replaced by the first parameter's name)
    examples: tuple[tuple[str, str], ...]  # (argument text, result text)


TASKS: tuple[StubTask, ...] = (
    StubTask(("keep_even", "only_evens", "filter_even"), "values: List[int]", "List[int]",
             "Return only the even numbers of {p}, in their original order.", (("[1, 2, 3, 4]", "[2, 4]"),
                                                                               ("[7, 9]", "[]"))),
    StubTask(("count_upper", "uppercase_count"), "text: str", "int",
             "Count the uppercase letters in {p}.", (("'Hello World'", "2"), ("'abc'", "0"))),
    StubTask(("running_max", "prefix_maxima"), "numbers: List[int]", "List[int]",
             "Return a list whose i-th element is the largest of the first i + 1 elements of {p}.",
             (("[3, 1, 4, 1, 5]", "[3, 3, 4, 4, 5]"),)),
    StubTask(("join_words", "glue_words"), "words: List[str], sep: str", "str",
             "Join {p} with the separator sep, skipping empty strings.", (("['a', '', 'b'], '-'", "'a-b'"),)),
    StubTask(("digit_product", "product_of_digits"), "n: int", "int",
             "Return the product of the decimal digits of the non-negative integer {p}.",
             (("234", "24"), ("0", "0"))),
    StubTask(("is_sorted_asc", "non_decreasing"), "items: List[int]", "bool",
             "Return True if {p} is sorted in non-decreasing order.", (("[1, 2, 2, 5]", "True"),
                                                                       ("[3, 1]", "False"))),
    StubTask(("char_histogram", "letter_counts"), "s: str", "Dict[str, int]",
             "Return a dictionary mapping each character of {p} to the number of times it occurs.",
             (("'aab'", "{'a': 2, 'b': 1}"),)),
    StubTask(("pairwise_sums", "adjacent_sums"), "xs: List[int]", "List[int]",
             "Return the sums of each pair of neighbouring elements of {p}.", (("[1, 2, 3]", "[3, 5]"),)),
    StubTask(("strip_vowels", "remove_vowels"), "text: str", "str",
             "Return {p} with every vowel (a, e, i, o, u, either case) removed.", (("'Banana'", "'Bnn'"),)),
    StubTask(("nth_triangular", "triangle_number"), "n: int", "int",
             "Return the n-th triangular number, the sum 1 + 2 + ... + {p}.", (("4", "10"), ("1", "1"))),
    StubTask(("swap_case_words", "alternate_case"), "sentence: str", "str",
             "Swap the case of every letter in {p}.", (("'Hi There'", "'hI tHERE'"),)),
    StubTask(("count_positive", "num_positive"), "nums: List[float]", "int",
             "Count how many numbers in {p} are strictly positive.", (("[-1.5, 0.0, 2.0, 3.5]", "2"),)),
    StubTask(("closest_to_zero", "nearest_zero"), "nums: List[int]", "int",
             "Return the element of {p} closest to zero; on a tie return the positive one.",
             (("[-3, 2, -2, 5]", "2"),)),
    StubTask(("chunk_string", "split_every"), "s: str, k: int", "List[str]",
             "Split {p} into consecutive pieces of length k; the last piece may be shorter.",
             (("'abcdefg', 3", "['abc', 'def', 'g']"),)),
    StubTask(("cumulative_product", "running_product"), "values: List[int]", "List[int]",
             "Return the running products of {p}.", (("[1, 2, 3, 4]", "[1, 2, 6, 24]"),)),
    StubTask(("first_repeated", "first_duplicate"), "items: List[int]", "Optional[int]",
             "Return the first element of {p} that has appeared before, or None if all are distinct.",
             (("[2, 5, 1, 5, 2]", "5"), ("[1, 2]", "None"))),
    StubTask(("title_words", "capitalize_all"), "text: str", "str",
             "Capitalize the first letter of every space-separated word in {p}.",
             (("'good morning sun'", "'Good Morning Sun'"),)),
    StubTask(("sum_of_squares", "square_sum"), "numbers: List[int]", "int",
             "Return the sum of the squares of {p}.", (("[1, 2, 3]", "14"), ("[]", "0"))),
    StubTask(("longest_run", "max_streak"), "bits: List[int]", "int",
             "Return the length of the longest run of equal consecutive elements in {p}.",
             (("[1, 1, 0, 1, 1, 1]", "3"),)),
    StubTask(("interleave", "zip_merge"), "a: List[int], b: List[int]", "List[int]",
             "Interleave {p} and b element by element; leftover elements go at the end.",
             (("[1, 3], [2, 4, 6]", "[1, 2, 3, 4, 6]"),)),
    StubTask(("count_words_longer", "long_word_count"), "sentence: str, n: int", "int",
             "Count the words of {p} that have more than n letters.", (("'the quick brown fox', 3", "2"),)),
    StubTask(("celsius_list", "to_celsius"), "fahrenheit: List[float]", "List[float]",
             "Convert every temperature in {p} from Fahrenheit to Celsius, rounded to one decimal.",
             (("[32.0, 212.0]", "[0.0, 100.0]"),)),
    StubTask(("unique_sorted", "sorted_distinct"), "values: List[int]", "List[int]",
             "Return the distinct elements of {p} in increasing order.", (("[3, 1, 3, 2]", "[1, 2, 3]"),)),
    StubTask(("digits_to_words", "spell_digits"), "number: int", "str",
             "Spell out each decimal digit of {p} in English, separated by spaces.",
             (("305", "'three zero five'"),)),
    StubTask(("is_power_of_two", "power_of_two"), "n: int", "bool",
             "Return True if {p} is a positive power of two.", (("8", "True"), ("12", "False"))),
    StubTask(("middle_chars", "center_of"), "word: str", "str",
             "Return the middle character of {p}, or the middle two if its length is even.",
             (("'abcde'", "'c'"), ("'abcd'", "'bc'"))),
    StubTask(("balance_after", "final_balance"), "operations: List[int]", "int",
             "Apply deposits (positive) and withdrawals (negative) in {p} to a zero balance and return it.",
             (("[10, -3, 5]", "12"),)),
    StubTask(("key_of_max", "argmax_key"), "scores: Dict[str, int]", "str",
             "Return the key of {p} with the largest value (the first such key on a tie).",
             (("{'a': 3, 'b': 7, 'c': 7}", "'b'"),)),
    StubTask(("rotate_left", "shift_left"), "items: List[int], k: int", "List[int]",
             "Rotate {p} to the left by k positions.", (("[1, 2, 3, 4], 1", "[2, 3, 4, 1]"),)),
    StubTask(("count_primes_below", "primes_under"), "n: int", "int",
             "Return how many prime numbers are smaller than {p}.", (("10", "4"), ("2", "0"))),
    StubTask(("vowel_positions", "where_vowels"), "s: str", "List[int]",
             "Return the indices of the vowels in {p}.", (("'hello'", "[1, 4]"),)),
    StubTask(("average_length", "mean_word_length"), "words: List[str]", "float",
             "Return the average length of the strings in {p}, or 0.0 for an empty list.",
             (("['ab', 'abcd']", "3.0"),)),
    StubTask(("matrix_trace", "diagonal_sum"), "grid: List[List[int]]", "int",
             "Return the sum of the main diagonal of the square matrix {p}.", (("[[1, 2], [3, 4]]", "5"),)),
    StubTask(("reverse_each", "mirror_words"), "sentence: str", "str",
             "Reverse every word of {p} but keep the words in order.", (("'abc de'", "'cba ed'"),)),
    StubTask(("within_range", "clip_values"), "values: List[int], low: int, high: int", "List[int]",
             "Clamp every element of {p} into the interval [low, high].",
             (("[-5, 3, 12], 0, 10", "[0, 3, 10]"),)),
    StubTask(("count_islands_1d", "count_segments"), "cells: str", "int",
             "Count the maximal groups of consecutive '#' characters in {p}.", (("'##..#.###'", "3"),)),
)

WRAPPERS = (
    "Write a solution to the following problem and make sure that it passes the tests:\n```python\n{stub}\n```",
    "Complete the following Python function:\n```python\n{stub}\n```",
    "Implement the function below.\n\n```python\n{stub}\n```",
    "{stub}",
)


def _typing_imports(signature: str) -> str:
    used = [n for n in ("Dict", "List", "Optional", "Tuple") if f"{n}[" in signature]
    return f"from typing import {', '.join(used)}\n\n\n" if used else ""


def stub_prompt(rng: random.Random) -> str:
    """One stub prompt (see the module docstring)."""
    task = rng.choice(TASKS)
    name = rng.choice(task.names)
    first = task.params.split(":")[0]
    signature = f"def {name}({task.params}) -> {task.returns}:"
    lead = rng.choice(['""" ', '"""', '"""\n    '])
    lines = [f"    {lead}{task.doc.format(p=first)}"]
    examples = list(task.examples)
    rng.shuffle(examples)
    for args, result in examples[: rng.randint(1, len(examples))]:
        if rng.random() < 0.7:
            lines += [f"    >>> {name}({args})", f"    {result}"]
        else:
            lines += [f"    Example: {name}({args}) == {result}"]
    lines.append('    """')
    stub = _typing_imports(signature) + signature + "\n" + "\n".join(lines) + "\n"
    return rng.choice(WRAPPERS).format(stub=stub)
