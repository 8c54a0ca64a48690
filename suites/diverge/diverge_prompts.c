/* The built-in prompts of diverge --ref-server (diverge_prompts.h says why they are mixed). Written
 * for vouch; changing one changes every later run's numbers, so add at the end only. */
#include "suites/diverge/diverge_prompts.h"

const char *const dt_builtin_prompts[] = {
    "The town council argued for three hours about whether the footbridge over the canal should be "
    "rebuilt in stone or in steel, and in the end they",
    "Write a Python function that returns the n-th Fibonacci number without recursion.\n\ndef fib(n):\n",
    "Q: A train leaves at 14:35 and arrives at 17:10. How long is the journey?\nA: The journey takes",
    "Ingredients for a simple tomato soup:\n1. six ripe tomatoes\n2. one onion\n3.",
    "The mitochondrion is often called the powerhouse of the cell because",
    "| city | country | population (millions) |\n|---|---|---|\n| Tokyo | Japan | 37.4 |\n| Delhi |",
    "{\"id\": 4182, \"name\": \"conveyor belt B\", \"status\": \"stopped\", \"reason\":",
    "SELECT customer_id, SUM(amount) AS total\nFROM payments\nWHERE paid_at >= '2024-01-01'\n",
    "Dear Ms. Alvarez,\n\nThank you for your letter of 12 March. Regarding the delayed shipment,",
    "In 1687 Isaac Newton published the Principia, in which he set out",
    "The derivative of x^3 + 2x^2 - 5x + 7 with respect to x is",
    "Le petit village se trouvait au bord d'une rivière tranquille, et chaque matin les pêcheurs",
    "Der Zug nach München hatte zwanzig Minuten Verspätung, weil",
    "El mercado abre a las siete de la mañana y los vendedores",
    "#include <stdio.h>\n\nint main(void) {\n  for (int i = 0; i < 10; i++) {\n",
    "Alice: Did you remember to water the plants?\nBob: I thought you said you would do it.\nAlice:",
    "The three laws of thermodynamics can be summarised as follows. First,",
    "Prime numbers between 50 and 100: 53, 59, 61, 67,",
    "To reset the router, hold the small button on the back for ten seconds, then",
    "Once upon a time, in a kingdom where it rained every Tuesday, there lived a clockmaker who",
    "git log --oneline shows the last commits; to undo the most recent one but keep its changes, run",
    "The quarterly report shows revenue of $4.2 million, up 12% from the previous quarter, while costs",
    "Photosynthesis converts light energy into chemical energy. The overall equation is",
    "fn main() {\n    let v: Vec<i32> = (1..=10).collect();\n    let sum: i32 =",
    "A haiku about the sea:\nGrey waves fold and break",
    "The difference between a list and a tuple in Python is that",
    "Step 1: Preheat the oven to 180 degrees Celsius.\nStep 2: Grease a round cake tin.\nStep 3:",
    "The capital of Australia is not Sydney but",
    "In the proof that the square root of 2 is irrational, we assume that sqrt(2) = p/q in lowest "
    "terms. Then",
    "<html>\n<head><title>Order status</title></head>\n<body>\n  <h1>",
    "東京は日本の首都で、",
    "After the storm the harbour was full of broken masts, and the old sailors said",
};
const int dt_n_builtin_prompts = (int)(sizeof dt_builtin_prompts / sizeof dt_builtin_prompts[0]);
