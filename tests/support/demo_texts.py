# Chinese and Japanese characters count two columns each: a few lines of them run past 100.
# ruff: noqa: E501
"""Summaries and translations of demo papers, written by hand as test data: what
`Digest.texts` carries once the pipeline has asked a model (`qwen2.5:7b-instruct` here) or
taken Hugging Face's `ai_summary`. Used by the golden emails (tests/support/demo_mail.py),
the browser checks and the Slack tests.

- `LIN_SUMMARIES`: lin's five Hugging Face papers: three summaries by the model, one by
  Hugging Face (its real `ai_summary`), one missing (the abstract is shown).
- `GRACE_CHINESE`: grace's ten quantum papers in Chinese: eight titles and abstracts
  translated, one title only (its abstract's translation failed), one nothing.
- `LIN_BOTH_JAPANESE`: lin's papers with the summaries above and Japanese translations of
  each title and summary (the paper without a summary: its title only).

A Chinese translation of an abstract is about a third of its English length in characters.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bot.core.models import HUGGING_FACE, Digest, Paper, PaperTexts, Subscriber
from bot.demo import bundled_papers
from bot.match.digest import RuleMatches, build_digest, match_rules
from bot.rules import parse_rule

MODEL = "qwen2.5:7b-instruct"

_SUMMARIES: dict[str, tuple[str, str]] = {
    "2608.19880": (
        "EnvHarness and EnvRigger dynamically reshape static environments via programmable "
        "plugins to target agent weaknesses and improve reinforcement learning co-evolution.",
        HUGGING_FACE,
    ),
    "2608.18580": (
        "FACET synthesizes executable terminal tasks for training agents, keeping the goals "
        "and constraints of its sources and grounding the instruction, reference solution and "
        "verifier in one repaired container. Targeted repair fixes only the broken artifacts, "
        "and fine-tuning on the tasks improves models of several sizes on…",
        MODEL,
    ),
    "2608.20335": (
        "4DAnyone reconstructs a 4D human from a casual monocular video: it generates dozens "
        "of consistent novel views and lifts them into 4D Gaussian Splatting. Reference "
        "Context Packing keeps the reference context at $O(1)$ and Target Context Routing lets "
        "view groups share context, so the views stay consistent at scale.",
        MODEL,
    ),
    "2608.19799": (
        "SWE-bench Science is a benchmark of 119 repair tasks from 98 scientific GitHub "
        "repositories in 20 domains. The best agent solves under 50% of them; the authors "
        "name four recurring failure mechanisms and show that scientific guidance helps when "
        "it is well grounded but can anchor agents when it is not.",
        MODEL,
    ),
    # 2608.20336 (WithEveryone): no summary (the model failed): its abstract is shown.
}

LIN_SUMMARIES: dict[str, PaperTexts] = {
    paper_id: PaperTexts(summary=summary, summary_by=by)
    for paper_id, (summary, by) in _SUMMARIES.items()
}
LIN_SUMMARIES_NOTE = "A summary could not be written for 1 paper today: its abstract is shown."

_JAPANESE: dict[str, tuple[str, str | None]] = {
    "2608.19880": (
        "EnvHarness：静的な世界を目覚めさせるエージェント学習",
        "EnvHarness と EnvRigger は、プログラム可能なプラグインによって静的な環境を動的に作り替え、"
        "エージェントの弱点を突くことで、強化学習における方策と環境の共進化を改善する。",
    ),
    "2608.18580": (
        "FACET：ターミナルタスク合成における元の意図と実行可能な状態の保持",
        "FACET は、エージェントの訓練用に実行可能なターミナルタスクを合成する。元資料の目標や制約を"
        "保ちつつ、指示・参照解・検証器を一つの修復済みコンテナに基づかせる。的を絞った修復で壊れた"
        "成果物だけを直し、このタスクでのファインチューニングは複数の規模のモデルで…",
    ),
    "2608.20335": (
        "4DAnyone：何気ない単眼動画から誰でも 4D で作成",
        "4DAnyone は、何気なく撮影された単眼動画から 4D の人物を再構成する。数十の一貫した新規視点"
        "映像を生成し、それを 4D ガウシアン・スプラッティングに持ち上げる。Reference Context Packing "
        "により参照コンテキストを O(1) に保ち、Target Context Routing により視点グループ間で"
        "コンテキストを共有するため、規模が大きくなっても視点の一貫性が保たれる。",
    ),
    "2608.19799": (
        "SWE-bench Science：コーディングエージェントは科学分野のエンジニアリング課題を解決できるか？",
        "SWE-bench Science は、20 の科学分野にわたる 98 の GitHub リポジトリから集めた 119 件の"
        "修復タスクからなるベンチマークである。最良のエージェントでも解決率は 50% 未満にとどまる。"
        "著者らは繰り返し現れる四つの失敗メカニズムを挙げ、科学的な指針は根拠が確かなときには役立つ"
        "が、そうでないときはエージェントを誤った方向に固定しうることを示す。",
    ),
    "2608.20336": ("WithEveryone：集合画像生成のための計画とアイデンティティ接地の統合", None),
}

LIN_BOTH_JAPANESE: dict[str, PaperTexts] = {
    paper_id: PaperTexts(
        summary=LIN_SUMMARIES[paper_id].summary if paper_id in LIN_SUMMARIES else None,
        summary_by=LIN_SUMMARIES[paper_id].summary_by if paper_id in LIN_SUMMARIES else None,
        language="ja",
        title=title,
        text=text,
    )
    for paper_id, (title, text) in _JAPANESE.items()
}

_CHINESE: dict[str, tuple[str, str | None]] = {
    "2411.18090": (
        "基于存内计算的并行全前馈神经网络表面码高层解码器用于量子纠错",
        "由于量子比特对环境噪声高度敏感，会导致退相干和信息丢失，主动量子纠错（QEC）必不可少。"
        "表面码是最有前景的容错量子纠错方案之一，但它需要准确、快速且可扩展到大规模量子平台的解码器。"
        "在各类解码器中，完全基于神经网络的高层解码器的解码阈值超过了基线解码器——最小权重完美匹配"
        "（MWPM），并且具有很强的可扩展性，是应对表面码挑战的理想方案之一。然而，目前完全基于神经"
        "网络的高层解码器只能串行运行，无法满足当前的延迟要求（低于 440 ns）。为应对这些挑战，我们"
        "首先提出了一种并行的全前馈神经网络（FFNN）高层表面码解码器，并在存内计算（CIM）硬件仿真"
        "平台上全面测量了其解码性能。在当前可用的硬件规格下，我们的工作实现了 14.22% 的解码阈值，"
        "超过了 MWPM 基线的 10.3%；对于码距 3、5、7 和 9，分别实现了 10.4%、11.3%、12% 和 11.6% "
        "的高伪阈值，解码延迟分别为 197.03 ns、234.87 ns、243.73 ns 和 251.65 ns。文中讨论了硬件"
        "参数和非理想因素对这些结果的影响，并将硬件仿真结果外推到 4K 量子低温环境。",
    ),
    "2411.18450": (
        "面向基于金刚石氮空位色心量子寄存器的两体门量子纠错",
        "金刚石中的色心为量子计算提供了一种可能的硬件，其中最基本的量子信息处理单元是氮空位（NV）"
        "色心，每个色心都与相邻的碳核自旋相接触。借助专门设计的动力学解耦序列，可以在 NV 色心的电子"
        "自旋与目标核自旋之间执行选择性的高保真两体门。在这项工作中，我们提出了一种方法，用于确定由"
        "自适应 XY 序列生成的门的最佳执行时间，以权衡保真度与执行速度。利用这些优化后的门，我们将核"
        "自旋环境用作色心寄存器内量子纠错的码空间。",
    ),
    "2411.17921": (
        "多量子比特的 Kochen-Specker 定理与经典极限",
        "若干论证表明量子力学与经典物理学互不相容。贝尔不等式和 Greenberger-Horne-Zeilinger（GHZ）"
        "论证适用于特定的非经典态。而 Kochen-Specker（KS）论证则因适用于任意态而格外引人注目。然而，"
        "尽管二者互不相容，随着接近宏观尺度，量子预测必须收敛到经典预测。这种收敛被称为“经典极限”，"
        "在量子形式体系内难以解释。在这篇短文中，我们将 KS 论证的简化 Mermin-Peres 形式（两个量子"
        "比特）推广到任意数量的量子比特。结果表明，随着量子比特数增加到宏观尺度，量子预测与经典预测"
        "趋于一致。这种解释经典极限的方式与先前针对 GHZ 态报道的结果一致，并对其有所改进。对一般情形"
        "（即对所有可能的可观测量）证明经典极限仅仅是粒子数增加的结果，这一点十分重要，而且似乎已近在"
        "眼前。",
    ),
    "2411.18196": (
        "跨分布式节点的多量子比特受控隐形传态",
        "本文以 n 个 m 量子比特 GHZ 态作为量子资源，实现任意 n 量子比特态在 m 个参与者之间的隐形"
        "传态，从而为网络中的分布式节点设计了一种隐形传态协议。我们修改了发送方的测量操作，使所有测量"
        "都是局域的，并将这一修改推广到有 m 个参与者的单量子比特隐形传态协议。进一步的扩展使该协议"
        "支持经由 m 个参与者的 n 量子比特隐形传态。我们探讨了广义协议的多种配置，并通过比较输入态与"
        "输出态的 Hinton 图评估了隐形传态的保真度。",
    ),
    "2411.18581": (
        "面向量子比特路由的并行令牌交换",
        "本文研究一个组合重构问题：寻找最优的交换序列，将放置在图顶点上的令牌从初始配置移动到期望的"
        "最终配置。这一问题是编译量子算法时降低量子线路深度的关键步骤。我们针对现代量子计算机中常见的"
        "图拓扑（包括环图、细分星图和网格图），给出了并行令牌交换问题的首个常数因子近似算法。我们还"
        "研究了该问题一个自然下界的所谓伸展因子，它已被证明有助于设计量子比特路由问题的启发式算法。"
        "最后，我们研究了这一重构问题的着色版本，其中部分令牌颜色相同，被视为不可区分。",
    ),
    "2411.17756": (
        "理解电路切割技术在实际量子应用中的可扩展性",
        "电路切割使得规模大于现有硬件的量子电路也能够执行。切割技术将电路拆分为更小的子电路，在硬件"
        "上运行，再通过经典后处理重新组合结果。过去五年来，电路切割技术得到了广泛研究，并已被主要量子"
        "硬件厂商纳入其扩展路线图。我们考察了现有的电路切割技术能否切实用于在容错量子计算机上编排执行。"
        "我们对重要的量子应用和不同类型的电路切割技术进行了基于资源估算的基准测试。我们的应用包括哈密顿"
        "量模拟等具有实际意义的算法，以及量子傅里叶变换等核心例程。我们使用 IBM 的 Qiskit 切割工具对"
        "这些应用进行切割，使用 Microsoft 的 Azure Quantum Resource Estimator 估算子电路所需资源，并"
        "建立模型来确定电路切割对量子比特、量子运行时间和经典运行时间的需求。我们证明，电路切割虽然适用"
        "于小规模系统，但随着量子比特数增加，量子运行时间和经典后处理开销呈指数增长，使其在现有实现策略"
        "下难以用于更大的量子系统。在从含噪量子硬件向容错过渡的过程中，我们的工作为量子软件和运行时系统"
        "的设计提供了重要指导。",
    ),
    "2411.17816": (
        "用量子抛硬币估计配分函数",
        "估计量子配分函数是许多领域中的一项关键任务。然而，由于哈密顿量的维数 $N$ 随粒子数呈指数增长，"
        "该问题在经典计算上一般是难解的。本文提出一种基于量子抛硬币的量子算法，可在乘性误差范围内估计"
        "一般哈密顿量 $H$ 的配分函数 $Z_\\beta$。这枚“硬币”由在逆温度 $\\beta$ 下对最大混合态施加量子"
        "虚时演化传播子 $f_\\beta[H]=e^{-\\beta H/{2}}$ 的概率定义，通过将 $f_\\beta[H]$ 块编码进幺正"
        "量子电路并随后进行后选择测量来实现。我们的算法不使用量子相位估计或振幅放大等代价高昂的子程序；"
        "硬币的二值性使我们能够借助伯努利过程分析工具，证明其运行时间按 $\\mathcal{O}(N/{Z_\\beta})$ "
        "缩放，比使用类似量子资源的以往通用算法有平方级提升。此外，由于硬币由单个可观测量定义，该方法"
        "很适合量子误差缓解。我们通过一个 9 量子比特的原理验证实验对此进行了实际检验，用简单的噪声外推"
        "方法成功缓解了误差。我们的发现为适用于早期容错量子硬件的量子配分函数估计提供了一种有意义的替代"
        "方案。",
    ),
    # Its abstract's translation failed: the title only.
    "2411.17843": ("具有自旋轨道耦合的驱动双量子点中由隧穿与弛豫导致的自旋翻转锁定", None),
    "2411.17906": (
        "利用自动微分实现驱动增强的激子转移",
        "我们对多种网络中的激发、吸收和转移过程进行建模和研究。该模型包括一个代表单模辐射场的谐振子、"
        "一个充当天线的量子比特、一个供激发传播的网络，以及网络末端充当吸收端（sink）的量子比特。我们"
        "研究了非共振激发如何能被最优地吸收并通过网络传输。我们考虑了三种策略：优化网络能量；调节辐射场、"
        "天线与网络之间的耦合；或在网络的起点和终点引入并优化驱动场。这些策略在三类复杂度递增的网络上"
        "进行了测试：最近邻构型、星形构型，以及与 Fenna-Matthews-Olson 复合体相关的网络。结果表明，在"
        "各种策略中，引入驱动场最为有效，可显著提高在给定时间内到达吸收端的概率。这一结果在不同维度和"
        "类型的网络中都保持稳定，而且驱动过程只需少量参数即可奏效。",
    ),
    # 2411.17950: nothing (both translations failed): the English alone.
}

GRACE_CHINESE: dict[str, PaperTexts] = {
    paper_id: PaperTexts(language="zh", title=title, text=text)
    for paper_id, (title, text) in _CHINESE.items()
}
GRACE_CHINESE_NOTE = "Translations could not be written for 2 papers today: the English is shown."


# -- fifty papers with texts, for the size, browser and Slack checks ------------------------

FIFTY_RULES = ("robot", "quantum", "learning")  # 264 papers of the bundled listing
_CORPUS = "".join(texts.text or "" for texts in GRACE_CHINESE.values())


def chinese(length: int, start: int = 0) -> str:
    """`length` characters of real Chinese prose (the translations above, in a ring)."""
    ring = _CORPUS * (2 + length // len(_CORPUS))
    start %= len(_CORPUS)
    return ring[start : start + length]


def english_summary(abstract: str) -> str:
    """A summary as the pipeline would show one: about 300 characters, cut with "…"."""
    text = " ".join(abstract.split())
    return text if len(text) <= 300 else text[:299].rsplit(" ", 1)[0] + "…"


def realistic_texts(
    digest: Digest, *, summaries: bool, language: str | None
) -> dict[str, PaperTexts]:
    """Texts for every paper of a digest, of the lengths real ones have: a summary of about
    300 characters; a Chinese title and text a third of the English length in characters."""
    texts: dict[str, PaperTexts] = {}
    for number, item in enumerate(digest.items):
        paper = item.paper
        summary = english_summary(paper.abstract) if summaries else None
        english = summary or paper.abstract
        texts[paper.id] = PaperTexts(
            summary=summary,
            summary_by=MODEL if summary else None,
            language=language,
            title=chinese(len(paper.title) // 3, 7 * number) if language else None,
            text=chinese(len(english) // 3, 13 * number) if language else None,
        )
    return texts


def fifty_paper_digest(**changes: Any) -> Digest:
    """A 50-paper digest of the bundled listing, as the pipeline builds it, for a subscriber
    with `changes` (summaries, language, abstracts ...), with realistic texts for it."""
    subscriber = replace(
        Subscriber(name="ada", email="ada@lab.example", rules=FIFTY_RULES, max_papers=50),
        **changes,
    )
    rules = [parse_rule(rule) for rule in FIFTY_RULES]
    digest = build_digest(subscriber, rules, tuple(bundled_papers()), delivered={}, now=FIFTY_NOW)
    assert digest is not None and digest.count == 50
    texts = realistic_texts(digest, summaries=subscriber.summaries, language=subscriber.language)
    note = "Summaries could not be written for 3 papers today: their abstracts are shown."
    return replace(digest, texts=texts, texts_note=note)


FIFTY_NOW = datetime(2024, 11, 28, 12, 0, tzinfo=UTC)


# -- the heaviest digest: for the size checks ---------------------------------------------

HEAVY_RULES = ("learning", "model", "data OR method")  # 662 papers of the bundled listing
HEAVY_NOTE = "Summaries could not be written for 3 papers today: their abstracts are shown."
JOURNAL = (
    "Proceedings of the 41st International Conference on Machine Learning, Vienna, "
    "Austria. PMLR 235:12345-12367, 2024"
)


@functools.cache
def _heavy_papers() -> tuple[tuple[Paper, ...], RuleMatches]:
    """The bundled listing, the longest abstracts first (then the most authors), each paper
    with every kind of link and a journal reference; and what HEAVY_RULES match in it."""
    listing = sorted(bundled_papers(), key=lambda p: (-len(p.abstract), -len(p.authors), p.id))
    papers = tuple(
        replace(
            paper,
            github=f"https://github.com/paperbell-heavy/{paper.id.replace('.', '-')}-code",
            github_stars=12_345,
            upvotes=321,
            hf_rank=number % 5 + 1,
            dois=(f"10.1103/PhysRevLett.{number}.{paper.id}", f"10.5281/zenodo.{number}"),
            journal_ref=paper.journal_ref or JOURNAL,
        )
        for number, paper in enumerate(listing)
    )
    return papers, match_rules([parse_rule(rule) for rule in HEAVY_RULES], papers)


def heaviest_digest(count: int, *, runaway: bool = False, **changes: Any) -> Digest:
    """The heaviest digest of `count` papers the bundled listing gives, for a subscriber
    with `changes`: its papers with the longest abstracts (then the most authors), each
    given every kind of link (code with stars, Hugging Face with upvotes and a rank, two
    DOIs) and a journal reference, matched by rules of common words (many highlights).
    Texts as real ones are (a summary of about 300 characters, Chinese a third of the
    English); `runaway`: as long as a model's runaway answer may be shown (the caps of
    `bot.render.view`: a 1,000-character summary, a 500-character title, 4,000 characters
    of translated text)."""
    from bot.render.view import SUMMARY_CHARS, TRANSLATED_TEXT_CHARS, TRANSLATED_TITLE_CHARS

    subscriber = replace(
        Subscriber(name="ada", email="ada@lab.example", rules=HEAVY_RULES, max_papers=count),
        **changes,
    )
    rules = [parse_rule(rule) for rule in HEAVY_RULES]
    papers, matches = _heavy_papers()
    digest = build_digest(subscriber, rules, papers, delivered={}, now=FIFTY_NOW, matches=matches)
    assert digest is not None and digest.count == min(count, 662)
    texts: dict[str, PaperTexts] = {}
    for number, item in enumerate(digest.items):
        paper = item.paper
        summary = None
        if subscriber.summaries:
            summary = paper.abstract[:SUMMARY_CHARS] if runaway else english_summary(paper.abstract)
        language = subscriber.language
        title = TRANSLATED_TITLE_CHARS if runaway else len(paper.title) // 3
        text = TRANSLATED_TEXT_CHARS if runaway else len(summary or paper.abstract) // 3
        texts[paper.id] = PaperTexts(
            summary=summary,
            summary_by=MODEL if summary else None,
            language=language,
            title=chinese(title, 7 * number) if language else None,
            text=chinese(text, 13 * number) if language else None,
        )
    return replace(digest, texts=texts, texts_note=HEAVY_NOTE)
