"""Templated instruction and conversation prompts: the broad chat data of the stage-3 drafter.

Two prompt kinds, both reproducible from a ``random.Random``:

* ``instruct``: one user turn from one of many task families an assistant is asked in practice: explanations,
  advice, comparisons, creative writing, letters and e-mails, rewriting, extraction, classification, planning,
  role play, STEM and humanities questions, reasoning puzzles, brainstorming.
* ``multi``: a conversation of two user turns, returned as a tuple. The target answers the first turn, and its
  answer becomes part of the second turn's prompt (:mod:`specframe_smollm2.training.generate_data` runs the two
  passes); the follow-ups ask for summaries, rewrites, examples, critiques and continuations, so the drafter
  also learns answers that refer back to an earlier turn.

No prompt is taken from an evaluation set (MT-Bench, AlpacaEval, Spec-Bench, ...): every prompt is assembled from
the word lists below, and the recipes drop any prompt sharing a 10-word sequence with an evaluation set.

Example::

    rng = random.Random(0)
    instruct_prompt(rng)     # 'Write a short thank-you note to a neighbour who watered my plants.'
    multi_prompt(rng)        # ('Write a short news report about a new library opening in a small town.',
                             #  'Summarize your report in two sentences.')
"""

from __future__ import annotations

import random
from collections.abc import Callable

TOPICS = [
    "photosynthesis", "black holes", "the water cycle", "inflation", "machine learning", "vaccines",
    "the French Revolution", "plate tectonics", "recursion", "compound interest", "climate change", "the immune system",
    "blockchains", "the stock market", "gravity", "volcanoes", "DNA", "electricity", "the internet", "sleep",
    "rainbows", "earthquakes", "supply and demand", "the moon's phases", "renewable energy", "bees and pollination",
    "the Roman Empire", "solar panels", "memory in the brain", "operating systems", "encryption", "ocean tides",
    "coffee", "jazz music", "the Olympic Games", "antibiotics", "the printing press", "electric cars",
    "the scientific method", "democracy", "the Renaissance", "quantum computing", "nutrition", "exercise and the heart",
    "the Silk Road", "migration of birds", "the greenhouse effect", "coral reefs", "the human eye", "magnetism",
    "interest rates", "taxes", "the Industrial Revolution", "ancient Egypt", "the Cold War", "social media",
    "video games", "artificial intelligence", "the periodic table", "evolution", "viruses and bacteria",
    "time zones", "the seasons", "rain forests", "deserts", "glaciers", "the speed of light", "sound waves",
    "batteries", "3D printing", "space exploration", "Mars", "the Milky Way", "telescopes", "microscopes",
    "the stock exchange", "budgeting", "credit scores", "public speaking", "meditation", "stress", "habits",
    "procrastination", "teamwork", "leadership", "negotiation", "urban gardening", "composting", "recycling",
    "plastic pollution", "water purification", "wind turbines", "nuclear energy", "hydroelectric dams",
    "the metric system", "prime numbers", "probability", "statistics", "fractions", "geometry", "algebra",
    "calculus", "logarithms", "binary numbers", "sorting algorithms", "databases", "cloud computing",
    "computer networks", "cybersecurity", "open-source software", "version control", "web browsers",
    "the human heart", "the digestive system", "the nervous system", "allergies", "dreams", "language learning",
    "the history of writing", "maps and navigation", "the compass", "clocks", "bread making", "fermentation",
    "chocolate", "tea", "spices", "photography", "painting", "classical music", "poetry", "theatre",
    "the novel", "mythology", "philosophy", "ethics", "economics", "psychology", "sociology", "archaeology",
    "dinosaurs", "fossils", "sharks", "whales", "octopuses", "ants", "honey", "forests", "rivers", "mountains",
]
ACTIVITIES = [
    "studying for exams", "learning to cook", "staying focused while working from home", "running a 5k",
    "saving money", "learning a new language", "sleeping better", "starting a garden", "giving a presentation",
    "keeping a journal", "planning a trip", "making new friends", "learning to play the guitar", "writing a CV",
    "preparing for a job interview", "moving to a new city", "starting a small business", "reading more books",
    "drinking more water", "reducing screen time", "learning to code", "training a puppy", "decluttering a home",
    "cooking on a budget", "staying motivated", "managing time", "organizing a birthday party", "hiking safely",
    "learning to swim", "taking better photos", "writing a novel", "painting with watercolors", "camping",
    "working in a team", "asking for a raise", "handling criticism", "caring for houseplants", "cycling to work",
]
FORMS = [
    "short poem", "haiku", "short story", "limerick", "product description", "motivational message",
    "two-sentence horror story", "short speech", "fable", "diary entry", "song chorus", "sonnet", "riddle",
    "dialogue between two friends", "movie plot summary", "children's bedtime story", "free-verse poem",
]
SUBJECTS = [
    "a lighthouse keeper", "a lost cat", "the first day of school", "a rainy afternoon", "an old clock",
    "a robot learning to paint", "the ocean at night", "a small bakery", "a mountain village", "autumn leaves",
    "a dragon who is afraid of fire", "a time traveler", "a forgotten letter", "a city in the future",
    "a snowy morning", "friendship", "a long train journey", "the last tree on Earth", "a talking bicycle",
    "a detective in a library", "a garden on the moon", "a kind stranger", "a birthday surprise", "the sea",
]
LETTERS = [
    ("a thank-you note", "a neighbour who watered my plants"), ("an email", "my manager asking for a day off"),
    ("a complaint letter", "a company whose product arrived broken"), ("an invitation", "friends for a picnic"),
    ("a cover letter", "a bookshop hiring an assistant"), ("an apology", "a friend whose party I missed"),
    ("an email", "a teacher asking about homework"), ("a message", "a landlord about a leaking tap"),
    ("a welcome email", "new members of a chess club"), ("a reminder", "a team about tomorrow's meeting"),
    ("a letter of recommendation", "a former student"), ("a short reply", "a customer asking for a refund"),
    ("a farewell message", "a colleague who is retiring"), ("a request", "the city council about a park"),
]
ROLES = [
    "a tour guide in Rome", "a pirate captain", "a friendly librarian", "a personal trainer", "a medieval knight",
    "a detective", "a chef in a busy restaurant", "a museum curator", "an astronaut on the space station",
    "a travel agent", "a career coach", "a science teacher", "a wise old owl", "a car mechanic", "a gardener",
    "a customer support agent", "a news reporter", "a zookeeper", "a game show host", "a historian",
]
ROLE_ASKS = [
    "Introduce yourself and describe a typical day.", "Give me your best advice for a beginner.",
    "Tell me about the most interesting thing you have seen.", "Explain what you do to a curious child.",
    "Describe your favourite tool and why you like it.", "Welcome me and tell me what to expect today.",
]
FACT_SENTENCES = [
    "{name} works at {company} as a {job} and lives in {city}. {name} started in {year} and earns ${salary} a year.",
    "The {product} costs ${price}, weighs {weight} kg and was released in {year} by {company}.",
    "{name} booked a flight from {city} to {city2} on {day} for ${price}, seat {seat}.",
    "{company} reported revenue of ${salary} in {year}, with {count} employees in {city}.",
]
JOBS = ["nurse", "engineer", "teacher", "designer", "pilot", "accountant", "chef", "lawyer", "driver", "analyst"]
CITIES = ["Lisbon", "Toronto", "Nairobi", "Osaka", "Lyon", "Denver", "Perth", "Cairo", "Oslo", "Lima", "Pune"]
COMPANIES = ["Northwind", "Bluepeak", "Acme Tools", "Greenleaf", "Brightline", "Solaris", "Riverstone"]
PRODUCTS = ["smartwatch", "blender", "e-reader", "camera", "backpack", "desk lamp", "headphones", "kettle"]
NAMES = ["Maya", "Liam", "Aisha", "Tom", "Sofia", "Kenji", "Priya", "Lucas", "Emma", "Omar", "Chloe", "Diego",
         "Hana", "Noah", "Zara", "Ivan", "Leila", "Marco", "Nina", "Felix", "Grace", "Ravi", "Elena", "Sam"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
SENTENCES_TO_EDIT = [
    "me and him goes to the store yesterday and buyed three apple",
    "the meeting have been moved to next week because of the holiday's",
    "i think that this product is very very good and i like it alot",
    "their going to announce the results tomorow morning",
    "the report which was wrote by the team were finished late",
    "we was planning to visited the museum but it were closed",
    "this phone are cheaper then the other one but it's battery is worse",
    "she dont know where her keys is",
]
REVIEWS = [
    "The food was cold and the waiter ignored us for twenty minutes.",
    "Absolutely loved this book, I could not put it down!",
    "The hotel room was clean, but the walls were thin and it was noisy at night.",
    "Delivery was fast and the shoes fit perfectly.",
    "The movie started well but the ending made no sense at all.",
    "Customer service solved my problem in five minutes. Great experience.",
    "The app crashes every time I try to upload a photo.",
    "It is an okay laptop for the price, nothing special.",
]
PUZZLES = [
    "If all bloops are razzies and all razzies are lazzies, are all bloops lazzies? Explain.",
    "A farmer has {n} sheep. All but {k} run away. How many are left?",
    "Which is heavier: a kilogram of feathers or a kilogram of iron? Explain your answer.",
    "I have {n} coins that add up to {cents} cents, and one of them is not a nickel. What could they be?",
    "{a} is taller than {b}, and {b} is taller than {c}. Who is the shortest?",
    "If it takes {n} machines {n} minutes to make {n} widgets, how long would {k} machines take to make {k} "
    "widgets?",
    "A bat and a ball cost ${total} in total. The bat costs $1 more than the ball. How much does the ball cost?",
    "Today is {day}. What day of the week will it be in {n} days?",
    "{a} has twice as many books as {b}, and together they have {total3} books. How many does each have?",
    "There are {n} people in a room and everyone shakes hands with everyone else once. How many handshakes?",
]
QUESTIONS = [
    "What is {topic} and why does it matter?", "How does {topic} work?",
    "What are common misconceptions about {topic}?", "What is the history of {topic}?",
    "How is {topic} used in everyday life?", "What should a beginner know about {topic}?",
    "What would happen if {topic} suddenly disappeared?", "How has {topic} changed over the last hundred years?",
    "What are the main open questions about {topic}?", "How would you teach {topic} in a single lesson?",
]
AUDIENCES = [
    "to a ten-year-old", "in simple terms", "in one paragraph", "to a high-school student", "with an everyday analogy",
    "in three bullet points", "briefly", "as if I were a beginner", "in detail", "step by step", "for an expert",
]


def _fact_sentence(rng: random.Random) -> str:
    return rng.choice(FACT_SENTENCES).format(
        name=rng.choice(NAMES), company=rng.choice(COMPANIES), job=rng.choice(JOBS), city=rng.choice(CITIES),
        city2=rng.choice(CITIES), year=rng.randint(1995, 2024), salary=rng.randint(30, 990) * 1000,
        product=rng.choice(PRODUCTS), price=rng.randint(15, 900), weight=round(rng.uniform(0.2, 4.0), 1),
        day=rng.choice(DAYS), seat=f"{rng.randint(1, 40)}{rng.choice('ABCDEF')}", count=rng.randint(5, 5000))


def _puzzle(rng: random.Random) -> str:
    a, b, c = rng.sample(NAMES, 3)
    n = rng.randint(3, 20)
    return rng.choice(PUZZLES).format(n=n, k=rng.randint(2, n - 1), cents=rng.randint(20, 95), a=a, b=b, c=c,
                                      total=rng.choice(["1.10", "1.20", "1.50", "2.10"]), day=rng.choice(DAYS),
                                      total3=3 * rng.randint(5, 40))


def instruct_prompt(rng: random.Random) -> str:
    """One single-turn instruction from a randomly chosen task family (see the module docstring)."""
    topic, other = rng.sample(TOPICS, 2)
    families: list[Callable[[], str]] = [
        lambda: f"Explain {topic} {rng.choice(AUDIENCES)}.",
        lambda: rng.choice(QUESTIONS).format(topic=topic),
        lambda: f"Give me {rng.randint(3, 8)} tips for {rng.choice(ACTIVITIES)}.",
        lambda: f"I am {rng.choice(ACTIVITIES)} and feel stuck. What would you advise?",
        lambda: f"Make a one-week plan for {rng.choice(ACTIVITIES)}.",
        lambda: f"Write a {rng.choice(FORMS)} about {rng.choice(SUBJECTS + TOPICS)}.",
        lambda: "Write {} to {}.".format(*rng.choice(LETTERS)),
        lambda: f"What is the difference between {topic} and {other}?",
        lambda: f"What are the main advantages and disadvantages of {topic}?",
        lambda: f"Write a persuasive paragraph arguing that everyone should learn about {topic}.",
        lambda: f"List {rng.randint(3, 9)} interesting facts about {topic}.",
        lambda: f"Brainstorm {rng.randint(4, 10)} creative names for a {rng.choice(PRODUCTS)} brand.",
        lambda: f"Pretend you are {rng.choice(ROLES)}. {rng.choice(ROLE_ASKS)}",
        lambda: f"Correct the grammar of this sentence: \"{rng.choice(SENTENCES_TO_EDIT)}\"",
        lambda: f"Is this review positive, negative or neutral? \"{rng.choice(REVIEWS)}\" Explain briefly.",
        lambda: f"Extract the names, places and numbers from this text as JSON: \"{_fact_sentence(rng)}\"",
        lambda: f"Turn this information into a short table: {_fact_sentence(rng)}",
        lambda: _puzzle(rng),
        lambda: f"Write a short essay outline about {topic} with an introduction, three sections and a conclusion.",
        lambda: f"Write {rng.randint(3, 6)} quiz questions with answers about {topic}.",
        lambda: f"Describe a day in the life of someone who studies {topic}.",
        lambda: f"Summarize what you know about {topic} in {rng.randint(2, 5)} sentences.",
        lambda: f"How could {topic} and {other} be connected? Give an example.",
        lambda: f"Write a short dialogue in which a student asks a teacher about {topic}.",
        lambda: f"Suggest a recipe that uses {rng.choice(['rice', 'lentils', 'eggs', 'spinach', 'pasta', 'potatoes'])}"
                f" and {rng.choice(['tomatoes', 'cheese', 'garlic', 'mushrooms', 'beans', 'onions'])}.",
        lambda: f"Plan a {rng.randint(2, 5)}-day trip to {rng.choice(CITIES)} on a small budget.",
    ]
    return rng.choice(families)()


FIRST_TURNS: list[Callable[[random.Random], str]] = [
    lambda rng: f"Write a short news report about {rng.choice(['a new library', 'a charity run', 'a science fair', 'a flood', 'a music festival', 'a new bridge', 'a local election', 'a lost dog found'])} in a small town.",  # noqa: E501
    lambda rng: f"Explain {rng.choice(TOPICS)} {rng.choice(AUDIENCES)}.",
    lambda rng: f"Write a {rng.choice(FORMS)} about {rng.choice(SUBJECTS)}.",
    lambda rng: f"Give me {rng.randint(3, 6)} tips for {rng.choice(ACTIVITIES)}.",
    lambda rng: "Write {} to {}.".format(*rng.choice(LETTERS)),
    lambda rng: f"What are the pros and cons of {rng.choice(TOPICS)}?",
    lambda rng: _puzzle(rng),
]
FOLLOW_UPS = [
    "Summarize your answer in two sentences.", "Now make it shorter and simpler.",
    "Rewrite it for a ten-year-old.", "Give two concrete examples.", "Turn your answer into a bulleted list.",
    "What would a critic say about this? Answer briefly.", "Make it more formal.", "Make it funnier.",
    "Can you continue it with one more paragraph?", "Which point is the most important, and why?",
    "Write a title for it.", "Rewrite it in the style of a news headline followed by one sentence.",
    "Explain your reasoning step by step.", "Now give the same answer as a short poem.",
    "What questions might someone still have after reading this?",
]


def multi_prompt(rng: random.Random) -> tuple[str, str]:
    """Two user turns: a first request and a follow-up that refers to the target's own answer."""
    return rng.choice(FIRST_TURNS)(rng), rng.choice(FOLLOW_UPS)
